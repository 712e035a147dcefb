package rpc_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestChoicesChecked: options over the limits are refused with
// invalid_argument naming the limit, for the question and both task
// report calls; good ones reach the hub with the request.
func TestChoicesChecked(t *testing.T) {
	t.Parallel()
	opts := func(labels ...string) []*pb.Question {
		q := &pb.Question{Question: "go on?"}
		for _, l := range labels {
			q.Options = append(q.Options, &pb.Option{Label: l})
		}
		return []*pb.Question{q}
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = string(rune('a' + i))
	}
	long := []*pb.Question{{Options: []*pb.Option{{Label: "a", Description: strings.Repeat("d", 201)}}}}
	for _, tc := range []struct {
		qs   []*pb.Question
		says string
	}{
		{opts(eleven...), "at most 10"},
		{opts("a", ""), "empty label"},
		{opts("a", "a"), "unique"},
		{opts(strings.Repeat("x", 81)), "limit of 80 bytes"},
		{long, "limit of 200 bytes"},
		{append(opts("a"), opts("b")...), "at most 1 set of options"},
	} {
		synctest.Test(t, func(t *testing.T) {
			f := start(t, setup{})
			ctx := context.Background()
			q := question("q", "Ship it?", 60)
			q.Request.Questions = tc.qs
			_, err1 := f.agent.AskQuestion(ctx, q)
			_, err2 := f.agent.TaskFinish(ctx, &pb.TaskFinishRequest{ID: "t", UserToken: tokA, Request: &pb.McpTaskFinishRequest{Summary: "done", Questions: tc.qs}})
			_, err3 := f.agent.WorkReport(ctx, &pb.WorkReportRequest{ID: "w", UserToken: tokA, Request: &pb.McpWorkReportRequest{Summary: "done", Questions: tc.qs}})
			for i, err := range []error{err1, err2, err3} {
				if codeOf(err) != "invalid_argument" || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("call %d: %v, want invalid_argument naming %q", i+1, err, tc.says)
				}
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		q := question("q", "", 60) // the current upstream generation asks in Questions alone
		q.Request.Questions = opts("Continue", "Stop")
		q.Request.Questions[0].Multiple = true
		f.askAsync(context.Background(), q)
		synctest.Wait()
		e := f.next(t)
		if e.Kind != hub.Asked || e.Request.Text != "go on?" || len(e.Request.Questions) != 1 ||
			e.Request.Questions[0].GetOptions()[1].GetLabel() != "Stop" || !e.Request.Questions[0].GetMultiple() {
			t.Errorf("asked: %+v", e)
		}
	})
}
