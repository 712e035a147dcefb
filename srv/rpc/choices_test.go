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
	long := []*pb.Question{{Options: []*pb.Option{{Label: "a", Description: strings.Repeat("d", 601)}}}}
	for _, tc := range []struct {
		qs   []*pb.Question
		says string
	}{
		{opts(eleven...), "at most 10"},
		{opts("a", ""), "empty label"},
		{opts("a", "a"), "unique"},
		{opts(strings.Repeat("x", 81)), "limit of 80 bytes"},
		{long, "limit of 600 bytes"},
		{append(opts("a"), opts("a", "a")...), "unique"}, // in any question
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

// TestSeveralQuestionsAskedAsText: the existing agentassistant's MCP
// server of the generation with options asks a list of questions, each
// with its header and options ("questions", as its tool's schema asks
// an agent to write them), and puts the first one's text in Question.
// The inbox offers one set of options, so several are asked as one text
// naming each question with its options, answered in words; none is
// lost and the call is not refused.
func TestSeveralQuestionsAskedAsText(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		q := question("q", "Which database?", 60)
		q.Request.Questions = []*pb.Question{
			{Question: "Which database?", Header: "Database", Options: []*pb.Option{{Label: "Postgres", Description: "a server"}, {Label: "SQLite"}}, Custom: false},
			{Question: "Which cache?", Header: "Cache", Options: []*pb.Option{{Label: "Redis"}, {Label: "None"}}, Multiple: true},
			{Question: "Anything else?", Header: "Notes"},
		}
		res := f.askAsync(context.Background(), q)
		synctest.Wait()
		e := f.next(t)
		if e.Kind != hub.Asked {
			t.Fatalf("not asked: %+v", e)
		}
		if len(e.Request.Questions) != 0 {
			t.Errorf("asked with %d sets of options, want them in the text", len(e.Request.Questions))
		}
		for _, want := range []string{"Which database?", "Database", "Postgres (a server)", "SQLite", "Which cache?", "Cache", "Redis", "Anything else?"} {
			if !strings.Contains(e.Request.Text, want) {
				t.Errorf("the text does not say %q:\n%s", want, e.Request.Text)
			}
		}
		if strings.Count(e.Request.Text, "Which database?") != 1 {
			t.Errorf("the first question twice:\n%s", e.Request.Text)
		}
		const reply = "Q: Database\nA: SQLite\n\nQ: Cache\nA: Redis"
		if err := f.answer(context.Background(), "q", "web", reply); err != nil {
			t.Fatalf("answer in words: %v", err)
		}
		r := <-res
		if r.err != nil || len(r.resp.GetContents()) == 0 || r.resp.GetContents()[0].GetText().GetText() != reply {
			t.Errorf("result: %+v, %v", r.resp, r.err)
		}
	})
}
