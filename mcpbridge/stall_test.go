package mcpbridge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// frozenFirst holds the first AskQuestion forever, as a server paused
// with SIGSTOP would (its kernel keeps the connection), and answers the
// same request's next call at once, as another instance of a cluster
// that has the person's answer.
type frozenFirst struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
	calls atomic.Int32
	ids   sync.Map
}

func (f *frozenFirst) AskQuestion(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	if f.calls.Add(1) == 1 {
		f.ids.Store("first", r.GetID())
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.ids.Store("second", r.GetID())
	return &pb.AskQuestionResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "answered elsewhere"}}}}, nil
}

// TestStalledServerIsLeft: while a question waits, the bridge probes its
// server; two failed probes in a row make it re-attach (the same request
// ID) through the next server, and the probe's skip is called to move
// there; the agent gets the answer. A probe that fails once and then
// answers changes nothing.
func TestStalledServerIsLeft(t *testing.T) {
	srv := &frozenFirst{}
	mux := http.NewServeMux()
	mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(srv))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	var probes, skips atomic.Int32
	probe := func(ctx context.Context) (func(), error) {
		n := probes.Add(1)
		if n == 1 {
			return nil, errors.New("one slow probe") // a blip: forgiven
		}
		if n == 4 || n == 5 { // the first server froze; the next one answers
			return func() { skips.Add(1) }, errors.New("no answer")
		}
		return nil, nil
	}
	c := newClient(t, nil, Options{Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, ts.URL), Probe: probe, ProbeEvery: time.Millisecond})
	r := call(t, c, "ask_question", map[string]any{"question": "Ship it?"}, nil)
	if r.IsError || text(r) != "answered elsewhere" {
		t.Fatalf("ask_question: %q (error %v)", text(r), r.IsError)
	}
	first, _ := srv.ids.Load("first")
	second, _ := srv.ids.Load("second")
	if first == nil || first != second {
		t.Errorf("the second call asked %v, the first %v: not a re-attach", second, first)
	}
	if srv.calls.Load() != 2 {
		t.Errorf("%d calls, want 2", srv.calls.Load())
	}
	if skips.Load() != 1 {
		t.Errorf("skip called %d times, want 1", skips.Load())
	}
}

// hungControl holds TakeMissedAnswers until its call ends, as a paused
// server does.
type hungControl struct{ fakeControl }

func (h *hungControl) TakeMissedAnswers(ctx context.Context, _ *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStalledServerLeftBeforeAsking: the server stops answering just as
// a call comes, so the bridge's fetch of the answers no agent had gets
// nothing back. The server is probed at once and, found stalled, left:
// the question is asked through the next one, not sent to the paused
// server to be found stalled only after two more probes.
func TestStalledServerLeftBeforeAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var skips atomic.Int32
		var skipped atomic.Bool
		probe := func(ctx context.Context) (func(), error) {
			if skipped.Load() {
				return nil, nil
			}
			return func() { skips.Add(1); skipped.Store(true) }, errors.New("no answer")
		}
		var asks atomic.Int32
		f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
			asks.Add(1)
			if !skipped.Load() { // still the paused server
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &pb.AskQuestionResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "answered elsewhere"}}}}, nil
		}}
		c := newClient(t, f, Options{Control: &hungControl{}, Probe: probe, ProbeEvery: 2 * time.Second})
		r := call(t, c, "ask_question", map[string]any{"question": "Ship it?"}, nil)
		if r.IsError || text(r) != "answered elsewhere" {
			t.Fatalf("ask_question: %q (error %v)", text(r), r.IsError)
		}
		if n := asks.Load(); n != 1 {
			t.Errorf("%d asks, want 1: the question went to the paused server first", n)
		}
		if n := skips.Load(); n != 1 {
			t.Errorf("skip called %d times, want 1", n)
		}
	})
}
