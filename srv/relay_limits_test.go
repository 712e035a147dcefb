package srv_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/gorilla/websocket"
)

// What one token may hold on /agent/ws: relay sessions, connections, the
// bytes of state its hosts leave with the relay; and what an agent's call
// to a host that never answers, or a host's answer to nothing, come to.

// tryJoin sends relay.join and returns the first answer: relay.joined or
// an error.
func tryJoin(t *testing.T, url, token, role, session string) (*agent, map[string]any) {
	t.Helper()
	a := dialAgent(t, url)
	a.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"` + role + `","sessionId":"` + session + `","token":"` + token + `"}}`)
	select {
	case m, ok := <-a.in:
		if !ok {
			t.Fatalf("join of %s closed without an answer: %v", session, a.endErr)
		}
		return a, m
	case <-time.After(5 * time.Second):
		t.Fatalf("no answer to the join of %s", session)
	}
	return nil, nil
}

// expectClosed waits for the server to close a's connection.
func (a *agent) expectClosed() {
	a.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-a.in:
			if !ok {
				return
			}
		case <-deadline:
			a.t.Fatal("the connection stayed open")
		}
	}
}

// refusedWith checks that m is an error of code answering the join, whose
// message names the setting.
func refusedWith(t *testing.T, m map[string]any, code, setting string) {
	t.Helper()
	p, _ := m["payload"].(map[string]any)
	msg, _ := p["message"].(string)
	if m["type"] != "error" || p["code"] != code || m["replyTo"] != "j" || !strings.Contains(msg, setting) {
		t.Fatalf("got %v, want an error %s naming %s", m, code, setting)
	}
}

// TestRelaySessionsPerToken: a token's peers open at most 64 relay
// sessions on /agent/ws by default; past them a join to a new one is
// refused (INVALID_MESSAGE naming the setting, the connection closed)
// before the session is made, while its open sessions take more peers,
// another token is not held back, and a session freed makes room.
func TestRelaySessionsPerToken(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	var open []*agent
	for i := range relay.DefaultMaxSessionsPerToken {
		open = append(open, joinAgent(t, url, tokA, fmt.Sprint("s-", i)))
	}
	a, m := tryJoin(t, url, tokA, "host", "one-more")
	refusedWith(t, m, wire.InvalidMessage, "[relay] max_sessions_per_token")
	a.expectClosed()
	if n := relaySessions(t, url); n != relay.DefaultMaxSessionsPerToken {
		t.Fatalf("%v relay sessions after the refusal, want %d: the refused one was made", n, relay.DefaultMaxSessionsPerToken)
	}
	joinAgent(t, url, tokA, "s-3")      // an open one takes more peers
	joinRawHost(t, url, tokA, "s-4")    // its host too
	joinAgent(t, url, tokB, "one-more") // another token is not held back
	waitRelaySessions(t, url, float64(relay.DefaultMaxSessionsPerToken+1))

	open[0].ws.Close() // s-0 is freed: its place is free
	waitRelaySessions(t, url, float64(relay.DefaultMaxSessionsPerToken))
	joinAgent(t, url, tokA, "one-more")
}

// TestRelayConnectionsPerToken: at most max_relay_connections_per_token
// connections join with one token; one that leaves gives its place back.
func TestRelayConnectionsPerToken(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{MaxConnsPerToken: 3})
	first := joinAgent(t, url, tokA, "x")
	joinRawHost(t, url, tokA, "x")
	joinAgent(t, url, tokA, "y")
	a, m := tryJoin(t, url, tokA, "agent", "x")
	refusedWith(t, m, wire.InvalidMessage, "[relay] max_connections_per_token")
	a.expectClosed()
	joinAgent(t, url, tokB, "x")
	first.ws.Close()
	waitConns(t, url, "x", 1)
	joinAgent(t, url, tokA, "x")
}

// bigState is a state.updated whose uiSpec holds n bytes.
func bigState(n int, mark string) string {
	return `{"v":"mvp-0.2","type":"state.updated","id":"st-` + mark + `","payload":{"uiSpec":{"mark":"` + mark + `","pad":"` + strings.Repeat("x", n) + `"}}}`
}

// nextState returns the mark of the next state.updated a receives.
func (a *agent) nextState() string {
	a.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-a.in:
			if !ok {
				a.t.Fatal("connection closed waiting for state.updated")
			}
			if m["type"] != "state.updated" {
				continue
			}
			mark, _ := m["payload"].(map[string]any)["uiSpec"].(map[string]any)["mark"].(string)
			return mark
		case <-deadline:
			a.t.Fatal("no state.updated within 5s")
		}
	}
}

// TestRelayStatePerToken: the state a token's hosts leave with the relay
// (uiSpec, messageHistory, toolSchema, user messages waiting) is bounded
// for all its relay sessions together: a host message past it is refused
// to its host (INVALID_MESSAGE naming the setting) and neither kept nor
// sent on; another token has its own budget; a session freed gives its
// bytes back.
func TestRelayStatePerToken(t *testing.T) {
	const budget = 1 << 20
	url, _ := newRelayServer(t, relay.Options{MaxStatePerToken: budget, HostGrace: 50 * time.Millisecond})
	hostA := joinRawHost(t, url, tokA, "a")
	agentA := joinAgent(t, url, tokA, "a")
	hostA.sendJSON(bigState(600<<10, "a1"))
	if got := agentA.nextState(); got != "a1" {
		t.Fatalf("agent of a got state %q, want a1", got)
	}

	hostB := joinRawHost(t, url, tokA, "b")
	agentB := joinAgent(t, url, tokA, "b")
	hostB.sendJSON(bigState(600<<10, "b1"))
	if p := hostB.expectError(wire.InvalidMessage, "st-b1"); !strings.Contains(p["message"].(string), "[relay] max_state_bytes_per_token") {
		t.Fatalf("the refusal does not name the setting: %v", p)
	}
	hostB.sendJSON(bigState(10, "b2"))
	if got := agentB.nextState(); got != "b2" {
		t.Fatalf("agent of b got state %q first, want b2: the refused one was sent on", got)
	}
	// What a participant typed is refused, not dropped unseen.
	hostB.sendJSON(`{"v":"mvp-0.2","type":"user.message","id":"um","payload":{"text":"` + strings.Repeat("y", 600<<10) + `"}}`)
	hostB.expectError(wire.InvalidMessage, "um")

	// Token B's budget is its own.
	hostOther := joinRawHost(t, url, tokB, "a")
	agentOther := joinAgent(t, url, tokB, "a")
	hostOther.sendJSON(bigState(600<<10, "o1"))
	if got := agentOther.nextState(); got != "o1" {
		t.Fatalf("token B's agent got state %q, want o1", got)
	}

	// Session a goes (its host, its agent, then the grace): its bytes are free.
	hostA.ws.Close()
	agentA.ws.Close()
	waitRelaySessions(t, url, 2)
	hostB.sendJSON(bigState(600<<10, "b3"))
	if got := agentB.nextState(); got != "b3" {
		t.Fatalf("agent of b got state %q, want b3 once a was freed", got)
	}
}

// TestAgentCallDeadline: a tool.call the host never answers is answered
// by the relay once the call's time is up (TOOL_EXECUTION_FAILED, to the
// agent's id); the host's late answer reaches no one and is no error,
// and the relay session goes on.
func TestAgentCallDeadline(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{CallTimeout: 200 * time.Millisecond})
	h := joinRawHost(t, url, tokA, "slow")
	a := joinAgent(t, url, tokA, "slow")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	a.expect("session.started")

	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c1","payload":{"toolName":"select","params":{},"reason":"test"}}`)
	call := h.until("tool.call")
	p := a.expectError(wire.ToolExecutionFailed, "c1")
	if msg := p["message"].(string); !strings.Contains(msg, "did not answer") || !strings.Contains(msg, "may or may not have happened") {
		t.Fatalf("the deadline's error says %q", msg)
	}

	// The late answer: nobody gets it, and the host is not told off.
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","id":"late","replyTo":%q,"payload":{"ok":true}}`, call["id"]))
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c2","payload":{"toolName":"select","params":{},"reason":"test"}}`)
	call2 := h.until("tool.call")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":true,"n":2}}`, call2["id"]))
	res := a.expect("tool.result")
	if res["replyTo"] != "c2" || res["payload"].(map[string]any)["n"] != 2.0 {
		t.Fatalf("the second call got %v", res)
	}
	h.sendJSON(`{"v":"mvp-0.2","type":"tool.result","id":"stray","replyTo":"nobody","payload":{"ok":true}}`)
	h.expectError(wire.InvalidMessage, "stray") // the first error it gets: none for the late answer
}

// TestHostAnswerToNothing: a host's tool.result or snapshot.state whose
// replyTo names no request it was sent is answered with INVALID_MESSAGE
// saying so; no agent gets it, and the connection goes on.
func TestHostAnswerToNothing(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "stray")
	a := joinAgent(t, url, tokA, "stray")
	h.sendJSON(`{"v":"mvp-0.2","type":"tool.result","id":"r1","replyTo":"req-404","payload":{"ok":true,"toolName":"select"}}`)
	if p := h.expectError(wire.InvalidMessage, "r1"); !strings.Contains(p["message"].(string), `"req-404"`) {
		t.Fatalf("the error does not name the replyTo: %v", p)
	}
	h.sendJSON(`{"v":"mvp-0.2","type":"snapshot.state","id":"r2","replyTo":"req-405","payload":{"uiSpec":{}}}`)
	h.expectError(wire.InvalidMessage, "r2")
	// An answer that names no request at all is one too: it is not pushed
	// to the agents as if it were the host's.
	h.sendJSON(`{"v":"mvp-0.2","type":"tool.result","id":"r3","payload":{"ok":true,"result":"forged"}}`)
	h.expectError(wire.InvalidMessage, "r3")
	h.sendJSON(`{"v":"mvp-0.2","type":"snapshot.state","id":"r4","replyTo":"","payload":{"uiSpec":{}}}`)
	h.expectError(wire.InvalidMessage, "r4")

	// A request answered twice: the second answer is an answer to nothing.
	a.ask("q1", "me")
	req := h.takeRequests(1)[0]
	h.answer(req)
	a.expectAnswer("q1", "me")
	h.answer(req)
	h.expectError(wire.InvalidMessage, "")
	a.ask("q2", "me")
	h.answer(h.takeRequests(1)[0])
	a.expectAnswer("q2", "me") // the agent got nothing in between
}

// A host's big state going to many agents that do not read is held once,
// not once per agent: their send queues share its encoding.
func TestBigStateHeldOnceForSlowAgents(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "big")
	const agents, states = 20, 12
	for range agents {
		// An agent that reads its joined and never again.
		ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/agent/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","sessionId":"big","token":"`+tokA+`"}}`)); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.ReadMessage(); err != nil || !strings.Contains(string(b), "relay.joined") {
			t.Fatalf("join: %s %v", b, err)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	big := strings.Repeat("x", 1<<20)
	for i := range states {
		h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"state.updated","id":"s%d","payload":{"uiSpec":{"n":%d,"s":"%s"}}}`, i, i, big))
	}
	// The host's frames are taken in order: once this one is refused,
	// the states before it went out.
	h.sendJSON(`{"v":"mvp-0.2","type":"no.such.type","id":"end","payload":{}}`)
	h.expectError(wire.InvalidMessage, "end")
	runtime.GC()
	runtime.ReadMemStats(&m1)
	grown := int64(m1.HeapInuse) - int64(m0.HeapInuse)
	if grown > 5*states<<20 {
		t.Errorf("the heap grew by %d MiB for %d states of 1 MiB to %d agents: held per agent", grown>>20, states, agents)
	}
}
