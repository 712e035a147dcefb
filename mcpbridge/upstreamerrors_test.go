package mcpbridge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// outcomeSrv answers every question and report with one outcome: either
// as upstream's agentassistant-srv does (internal/service: a response
// with is_error, meta {"error": code, "message": ...} and no contents),
// or as ours does (a Connect error).
type outcomeSrv struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
	upstream bool
	code     string // timeout, no_clients, cancelled
	// gate, when set, holds the outcome until it is closed.
	gate chan struct{}
}

func (o *outcomeSrv) reply() (*pb.AskQuestionResponse, error) {
	if o.gate != nil {
		<-o.gate
	}
	if o.upstream {
		return &pb.AskQuestionResponse{IsError: true, Meta: map[string]string{"error": o.code, "message": "from upstream: " + o.code}}, nil
	}
	switch o.code {
	case "timeout":
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("no reply within 10m0s; the request was withdrawn"))
	case "cancelled":
		return nil, connect.NewError(connect.CodeCanceled, errors.New("the request was withdrawn before anyone answered"))
	}
	return nil, connect.NewError(connect.CodeInternal, errors.New("our server has no "+o.code))
}

func (o *outcomeSrv) AskQuestion(_ context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	resp, err := o.reply()
	if resp != nil {
		resp.ID = r.GetID()
	}
	return resp, err
}

func (o *outcomeSrv) WorkReport(_ context.Context, r *pb.WorkReportRequest) (*pb.WorkReportResponse, error) {
	resp, err := o.reply()
	if err != nil {
		return nil, err
	}
	return &pb.WorkReportResponse{ID: r.GetID(), IsError: resp.IsError, Meta: resp.Meta}, nil
}

func (o *outcomeSrv) bridge(t *testing.T) *client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(o))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	// One server URL for both, so that the sentences can be compared.
	return newClient(t, nil, Options{Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, ts.URL)})
}

// TestUpstreamServerOutcomes: upstream's agentassistant-srv tells a timeout,
// "no clients" and a cancel as a response with is_error and
// meta["error"], without contents. The agent hears them as it does from
// our server (the same sentence for a timeout and a cancel), never as an
// empty answer.
func TestUpstreamServerOutcomes(t *testing.T) {
	for _, tool := range []struct{ name, arg string }{{"ask_question", "question"}, {"task_finish", "summary"}, {"work_report", "summary"}} {
		for _, code := range []string{"timeout", "no_clients", "cancelled"} {
			t.Run(tool.name+"/"+code, func(t *testing.T) {
				args := map[string]any{tool.arg: "Ship it?", "timeout": 600}
				r := call(t, (&outcomeSrv{upstream: true, code: code}).bridge(t), tool.name, args, nil)
				got := text(r)
				if !r.IsError || strings.Contains(got, "empty reply") || strings.Contains(got, "acknowledged") {
					t.Fatalf("upstream's %s reads as %q (error %v)", code, got, r.IsError)
				}
				if code == "no_clients" {
					if !strings.Contains(got, "No device") {
						t.Errorf("no_clients reads as %q, want it to say no device was connected", got)
					}
					return
				}
				if want := text(call(t, (&outcomeSrv{code: code}).bridge(t), tool.name, args, nil)); got != want {
					t.Errorf("upstream's %s reads as\n%q\nours as\n%q", code, got, want)
				}
			})
		}
	}
}

// TestUpstreamOutcomeWithFormIsNoAnswer: a client that shows forms gets
// the question as one; when upstream's server then ends the call with an
// outcome (no device connected, a timeout), the form is withdrawn, and
// the result must not say the person answered on a phone or PC: nobody
// answered.
func TestUpstreamOutcomeWithFormIsNoAnswer(t *testing.T) {
	for _, code := range []string{"no_clients", "timeout"} {
		t.Run(code, func(t *testing.T) {
			shown := make(chan struct{})
			o := &outcomeSrv{upstream: true, code: code, gate: shown}
			mux := http.NewServeMux()
			mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(o))
			ts := httptest.NewServer(mux) // upstream's has no SrvAgentAssistReply: 404
			t.Cleanup(ts.Close)
			b := New(Options{
				Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, ts.URL),
				Reply:  agentassistprotoconnect.NewSrvAgentAssistReplyClient(http.DefaultClient, ts.URL),
				Token:  "tok-123456789", ServerURL: ts.URL,
			})
			init := mcp.InitializeRequest{}
			init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
			c := connected(t, b.MCPServer, init, client.WithElicitationHandler(formFunc(func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				close(shown) // the form is on screen; the person never fills it in
				<-ctx.Done()
				return nil, ctx.Err()
			})))
			r := call(t, c, "ask_question", map[string]any{"question": "Ship it?"}, nil)
			if got := text(r); !r.IsError || strings.Contains(got, "answered on") {
				t.Errorf("upstream's %s with a form shown reads as %q (error %v)", code, got, r.IsError)
			}
		})
	}
}

type formFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f formFunc) Elicit(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, r)
}
