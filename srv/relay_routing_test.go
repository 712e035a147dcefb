package srv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv/relay"
)

// joinRawHost joins as the host of session with a raw client, so a test
// decides when (and whether) each request is answered.
func joinRawHost(t *testing.T, url, token, session string) *agent {
	t.Helper()
	h := dialAgent(t, url)
	h.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"hj","payload":{"role":"host","sessionId":"` + session + `","token":"` + token + `"}}`)
	h.expect("relay.joined")
	return h
}

// hostRequest is a request as the host received it.
type hostRequest struct{ id, who string }

// takeRequests reads n snapshot.get requests at the host.
func (a *agent) takeRequests(n int) []hostRequest {
	a.t.Helper()
	var out []hostRequest
	for len(out) < n {
		m := a.expect("snapshot.get")
		id, _ := m["id"].(string)
		who, _ := m["payload"].(map[string]any)["who"].(string)
		out = append(out, hostRequest{id, who})
	}
	return out
}

// answer replies to req as the host, echoing who asked.
func (a *agent) answer(req hostRequest) {
	a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"snapshot.state","replyTo":%q,"payload":{"uiSpec":{"for":%q}}}`, req.id, req.who))
}

// ask sends a snapshot.get that the host can tell apart by who.
func (a *agent) ask(id, who string) {
	a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"snapshot.get","id":%q,"payload":{"who":%q}}`, id, who))
}

// expectAnswer waits for the answer to the request (id, who).
func (a *agent) expectAnswer(id, who string) {
	a.t.Helper()
	m := a.expect("snapshot.state")
	got, _ := m["payload"].(map[string]any)["uiSpec"].(map[string]any)["for"].(string)
	if m["replyTo"] != id || got != who {
		a.t.Fatalf("waiting for the answer to %s (%s), got replyTo %v for %q", id, who, m["replyTo"], got)
	}
}

// waitConns waits until the relay session has n peers connected.
func waitConns(t *testing.T, url, session string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, m := call(t, "GET", url+"/internal/sessions/"+session+"/status", "")
		if m["connection_count"] == float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay session %s: %v, want %d connections", session, m, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRequestIDsNeverCollide: the ids the relay gives requests on their
// way to the host are unique among the calls in flight, whatever ids the
// agents chose, and every answer reaches the agent that asked, and only it.
func TestRequestIDsNeverCollide(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "ids")
	a := joinAgent(t, url, tokA, "ids")
	b := joinAgent(t, url, tokA, "ids")
	c := joinAgent(t, url, tokA, "ids")

	// A takes the names the relay would give a second "x".
	for i := 1; i <= 3; i++ {
		a.ask(fmt.Sprint("x~", i), fmt.Sprint("A", i))
	}
	reqs := h.takeRequests(3)
	b.ask("x", "B")
	reqs = append(reqs, h.takeRequests(1)...)
	c.ask("x", "C")
	reqs = append(reqs, h.takeRequests(1)...)

	seen := map[string]string{}
	for _, r := range reqs {
		if prev, dup := seen[r.id]; dup {
			t.Fatalf("the host got two calls named %q (from %s and %s): %v", r.id, prev, r.who, reqs)
		}
		seen[r.id] = r.who
	}
	for _, r := range reqs {
		h.answer(r)
	}
	for i := 1; i <= 3; i++ {
		a.expectAnswer(fmt.Sprint("x~", i), fmt.Sprint("A", i))
	}
	b.expectAnswer("x", "B")
	c.expectAnswer("x", "C")
	for _, ag := range []*agent{a, b, c} {
		ag.quiet(200 * time.Millisecond)
	}
}

// TestLateAnswerToALeaver: an agent leaves with a request in flight and
// another reuses its id; the host's late answer to the first goes to
// nobody, and the second gets its own answer.
func TestLateAnswerToALeaver(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "late")
	d := joinAgent(t, url, tokA, "late")
	e := joinAgent(t, url, tokA, "late")

	d.ask("y", "D")
	first := h.takeRequests(1)
	d.ws.Close()
	waitConns(t, url, "late", 2) // the host and e

	e.ask("y", "E")
	second := h.takeRequests(1)
	if second[0].id == first[0].id {
		t.Fatalf("the host got two calls named %q", first[0].id)
	}
	h.answer(first[0])
	h.answer(second[0])
	e.expectAnswer("y", "E")
	e.quiet(200 * time.Millisecond)
}
