package mcpbridge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// erroringServer answers every AskQuestion with the error its question
// names, the way agentassistant-srv's services do.
type erroringServer struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
}

func (erroringServer) AskQuestion(_ context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	switch r.GetRequest().GetQuestion() {
	case "closed":
		return nil, connect.NewError(connect.CodeUnavailable, hub.ErrClosed)
	case "withdrawn":
		return nil, connect.NewError(connect.CodeCanceled, hub.ErrWithdrawn)
	case "timeout":
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("no reply within 1m0s; the request was withdrawn"))
	case "token":
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("missing or invalid token"))
	}
	return nil, connect.NewError(connect.CodeInternal, errors.New("unexpected"))
}

// realErrors are the errors a Connect client really reports: a refused
// dial, a link reset mid-call, and what a server answers.
type realErrors struct {
	refused, reset, closed, withdrawn, timeout, token error
}

func collectErrors(t *testing.T) realErrors {
	t.Helper()
	ask := func(url, q string) error {
		c := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url)
		_, err := c.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: "x", Request: &pb.McpAskQuestionRequest{Question: q}})
		if err == nil {
			t.Fatal("no error")
		}
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	ln.Close()
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.(*net.TCPConn).SetLinger(0) // a reset, as a killed server's kernel sends
			c.Close()
		}
	}))
	defer reset.Close()
	mux := http.NewServeMux()
	mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(erroringServer{}))
	served := httptest.NewServer(mux)
	defer served.Close()
	return realErrors{
		refused: ask(closedURL, "q"), reset: ask(reset.URL, "q"),
		closed: ask(served.URL, "closed"), withdrawn: ask(served.URL, "withdrawn"),
		timeout: ask(served.URL, "timeout"), token: ask(served.URL, "token"),
	}
}

// TestReattachTexts: whatever happens to the server during a call, the
// call ends when it should and its text says what happened, truly: never
// "lost" for a server never reached, the time since the loss and the
// timeout as they were, the first contact tried for as long as documented.
func TestReattachTexts(t *testing.T) {
	e := collectErrors(t)
	answer := &pb.AskQuestionResponse{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "yes"}}}}
	// hold waits until the call has been open until at, or is cancelled.
	hold := func(ctx context.Context, now, at time.Duration) error {
		select {
		case <-time.After(at - now):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	type server func(ctx context.Context, at time.Duration) (*pb.AskQuestionResponse, error)
	// lostAt10 is a server that takes the call, goes away 10 s later
	// with err, and is back at back (0: never) with then.
	lostAt10 := func(err error, back time.Duration, then func() (*pb.AskQuestionResponse, error)) server {
		return func(ctx context.Context, at time.Duration) (*pb.AskQuestionResponse, error) {
			switch {
			case at == 0:
				if err := hold(ctx, at, 10*time.Second); err != nil {
					return nil, err
				}
				return nil, err
			case back == 0 || at < back:
				return nil, e.refused
			}
			return then()
		}
	}
	answers := func() (*pb.AskQuestionResponse, error) { return answer, nil }
	for _, tc := range []struct {
		name    string
		srv     server
		ok      bool // the answer arrives
		took    time.Duration
		want    []string
		notWant []string
	}{
		{name: "never reached", srv: func(context.Context, time.Duration) (*pb.AskQuestionResponse, error) { return nil, e.refused },
			took:    5 * time.Second,
			want:    []string{"Could not reach agentassistant-srv at http://127.0.0.1:22080", "connection refused", "tried for 5s", "has not seen the question"},
			notWant: []string{"Lost", "ago", "deadline", "timeout"}},
		{name: "reached late within the first contact", srv: func(_ context.Context, at time.Duration) (*pb.AskQuestionResponse, error) {
			if at < 3*time.Second {
				return nil, e.refused
			}
			return answer, nil
		}, ok: true, took: 3 * time.Second},
		{name: "token rejected", srv: func(context.Context, time.Duration) (*pb.AskQuestionResponse, error) { return nil, e.token },
			took: 0, want: []string{"rejected the token"}, notWant: []string{"Lost", "reach"}},
		{name: "killed and back", srv: lostAt10(e.reset, 40*time.Second, answers), ok: true, took: 41 * time.Second},
		{name: "stopped cleanly and back", srv: lostAt10(e.closed, 20*time.Second, answers), ok: true, took: 25 * time.Second},
		{name: "killed, never back", srv: lostAt10(e.reset, 0, nil), took: time.Minute,
			want: []string{"Lost agentassistant-srv at http://127.0.0.1:22080 50s ago (" + rootCause(e.reset) + ")", "60-second timeout",
				"last try: connection refused", "answer is kept"},
			notWant: []string{"Could not reach", "deadline"}},
		{name: "stopped cleanly, never back", srv: lostAt10(e.closed, 0, nil), took: time.Minute,
			want:    []string{"Lost agentassistant-srv at http://127.0.0.1:22080 50s ago (server is shutting down)", "60-second timeout"},
			notWant: []string{"Could not reach", "went away before"}},
		{name: "back after the request timed out", srv: lostAt10(e.reset, 30*time.Second, func() (*pb.AskQuestionResponse, error) { return nil, e.timeout }),
			took: 41 * time.Second, want: []string{"No one answered the question within 60 seconds"}, notWant: []string{"Lost", "reach"}},
		{name: "withdrawn while waiting", srv: lostAt10(e.withdrawn, 30*time.Second, nil), took: 10 * time.Second,
			want: []string{"withdrawn before anyone answered"}, notWant: []string{"Lost", "reach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := Options{ServerURL: "http://127.0.0.1:22080"}
				o.defaults()
				b := newBridge(o)
				start := time.Now()
				res, err := b.wait(context.Background(), mcp.CallToolRequest{}, wire.AskQuestion, "id-1", nil, time.Minute,
					func(ctx context.Context) (*pb.AskQuestionResponse, error) { return tc.srv(ctx, time.Since(start)) })
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				got := text(res)
				if res.IsError == tc.ok || tc.ok && got != "yes" {
					t.Errorf("result %q (error %v)", got, res.IsError)
				}
				if took != tc.took {
					t.Errorf("ended after %s, want %s", took, tc.took)
				}
				for _, w := range tc.want {
					if !strings.Contains(got, w) {
						t.Errorf("%q lacks %q", got, w)
					}
				}
				for _, w := range tc.notWant {
					if strings.Contains(got, w) {
						t.Errorf("%q says %q", got, w)
					}
				}
			})
		})
	}
}
