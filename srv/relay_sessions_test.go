package srv_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/testhost"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// relaySessions reads how many relay sessions the server holds.
func relaySessions(t *testing.T, url string) float64 {
	t.Helper()
	_, m := call(t, "GET", url+"/health", "")
	n, ok := m["relaySessions"].(float64)
	if !ok {
		t.Fatalf("/health has no relaySessions: %v", m)
	}
	return n
}

// waitRelaySessions waits until the server holds n relay sessions.
func waitRelaySessions(t *testing.T, url string, n float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := relaySessions(t, url)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %v relay sessions, want %v", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func uiRelayClient(url string) agentassistprotoconnect.SrvUIRelayClient {
	return agentassistprotoconnect.NewSrvUIRelayClient(http.DefaultClient, url, connect.WithInterceptors(
		connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set(auth.TokenHeader, tokA)
				return next(ctx, req)
			}
		})))
}

// TestLookupsMakeNoRelaySession: asking about relay sessions, or pushing
// to ones nobody is in, leaves nothing behind.
func TestLookupsMakeNoRelaySession(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	for i := range 50 {
		name := fmt.Sprint("probe-", i)
		if code, m := call(t, "GET", url+"/internal/sessions/"+name+"/status", ""); code != 200 || m["online"] != false || m["connection_count"] != 0.0 {
			t.Fatalf("status of %s: %d %v", name, code, m)
		}
		if code, m := call(t, "POST", url+"/internal/send", `{"session_id":"`+name+`","event":{"type":"agent.message"}}`); code != http.StatusConflict || m["error"] != "client_offline" {
			t.Fatalf("push to %s: %d %v", name, code, m)
		}
		r, err := ui.GetUIState(context.Background(), &pb.GetUIStateRequest{RelaySession: name})
		if err != nil || r.GetState().GetHostOnline() {
			t.Fatalf("UI state of %s: %v %v", name, r, err)
		}
	}
	if n := relaySessions(t, url); n != 0 {
		t.Fatalf("looking at 50 empty relay sessions left %v of them in memory", n)
	}
}

// TestRelaySessionsFreed: a relay session is forgotten once nobody is in
// it; one whose host left keeps the host's last state for the grace.
func TestRelaySessionsFreed(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	var agents []*agent
	for i := range 10 {
		agents = append(agents, joinAgent(t, url, tokA, fmt.Sprint("agent-only-", i)))
	}
	waitRelaySessions(t, url, 10)
	for _, a := range agents {
		a.ws.Close()
	}
	waitRelaySessions(t, url, 0)

	// The host leaves: its last state stays for the agents for the grace.
	h := hostFor(t, url, tokA, testhost.Options{Session: "reload"})
	ui := uiRelayClient(url)
	r, err := ui.GetUIState(context.Background(), &pb.GetUIStateRequest{RelaySession: "reload", Refresh: true})
	if err != nil || !r.GetState().GetHostOnline() || r.GetState().GetUiSpecJson() == "" {
		t.Fatalf("with the host: %v %v", r, err)
	}
	h.Close()
	waitConns(t, url, "reload", 0)
	r, err = ui.GetUIState(context.Background(), &pb.GetUIStateRequest{RelaySession: "reload"})
	if err != nil || r.GetState().GetHostOnline() || r.GetState().GetUiSpecJson() == "" || r.GetState().GetAllToolsJson() == "[]" {
		t.Fatalf("after the host left: %v %v", r, err)
	}
	if n := relaySessions(t, url); n != 1 {
		t.Fatalf("%v relay sessions while the host may come back, want 1", n)
	}
}

// TestRelaySessionFreedAfterHostGrace: once the grace of a host that left
// is over, its relay session is forgotten.
func TestRelaySessionFreedAfterHostGrace(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{HostGrace: 50 * time.Millisecond})
	h := hostFor(t, url, tokA, testhost.Options{Session: "gone"})
	a := joinAgent(t, url, tokA, "gone")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	a.expect("session.started")
	h.Close()
	a.expect("session.ended")
	a.ws.Close()
	waitRelaySessions(t, url, 0)
}

// TestWaitingCallHoldsItsRelaySession: an MCP call waiting for the
// participant in an empty relay session gets what the host, joining
// later, says: the session is not freed under it.
func TestWaitingCallHoldsItsRelaySession(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	type res struct {
		r   *pb.WaitUserMessageResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := ui.WaitUserMessage(context.Background(), &pb.WaitUserMessageRequest{RelaySession: "pin", TimeoutMs: 10_000})
		done <- res{r, err}
	}()
	waitRelaySessions(t, url, 1) // the call is waiting
	h := hostFor(t, url, tokA, testhost.Options{Session: "pin"})
	h.SayUser("evening shows, please")
	select {
	case r := <-done:
		if r.err != nil || !r.r.GetReceived() || r.r.GetText() != "evening shows, please" {
			t.Fatalf("the waiting call got %v %v", r.r, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call never got the message")
	}
}
