package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// healthIs waits until s's /health answers code (503 while its instance
// has lost NATS, 200 once it is back on it).
func healthIs(t *testing.T, s *server, code int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", s.URL+"/health", nil)
		req.Header.Set("X-Agentassistant-Token", tokenA)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health never answered %d (last: %v %v)", code, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterShortNATSOutage: while the cluster's NATS is away a device's
// answer is refused with an error that says so, and an agent that asks
// then is not failed at once: its call waits, retried, and is asked once
// NATS is back, within the question's timeout; the answer reaches it.
func TestClusterShortNATSOutage(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	device := dial(t, one, tokenA, "phone")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	first := make(chan res, 1)
	go func() {
		// A caller that takes missed answers is let go, unavailable,
		// while its instance cannot reach NATS, and asks again by the
		// same ID, as agentassistant-mcp does.
		for {
			r, err := connectAsk(context.Background(), one, "before-outage", "Asked before?")
			if connect.CodeOf(err) == connect.CodeUnavailable {
				time.Sleep(100 * time.Millisecond) // the agent's backoff, not a wait for state
				continue
			}
			first <- res{r, err}
			return
		}
	}()
	must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	agent := startMCP(t, one, tokenA)

	ns.Shutdown()
	healthIs(t, one, http.StatusServiceUnavailable)
	if err := device.Send(wstest.TextReply("before-outage", "Yes.")); err != nil {
		t.Fatal(err)
	}
	e := must[*pb.WebsocketMessage](t)(device.Expect("Error", 10*time.Second)).GetError()
	if e.GetCode() != "not_saved" || !strings.Contains(e.GetMessage(), "NATS is unreachable") {
		t.Errorf("answer during the outage: %v", e)
	}
	done := askFromProject(agent, "Asked during the outage?", "/p")
	// The call stays open while NATS is away (it was failed at once).
	select {
	case r := <-done:
		t.Fatalf("the call ended during the outage: %+v %v: %s", r.r, r.err, resultText(r.r))
	case <-time.After(4 * time.Second):
	}
	ns.Up()

	m, err := device.Expect("AskQuestion", 30*time.Second)
	if err != nil {
		t.Fatalf("the question asked during the outage never reached the device: %v", err)
	}
	if m.GetAskQuestionRequest().GetRequest().GetQuestion() != "Asked during the outage?" {
		t.Fatalf("question = %v", m)
	}
	if err := device.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "It got through.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "It got through." {
			t.Fatalf("result = %+v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer")
	}
	// The question asked before the outage is answered now.
	if err := device.Send(wstest.TextReply("before-outage", "Yes.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-first:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("first = %v %v", r.r, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first agent never got the answer")
	}
}
