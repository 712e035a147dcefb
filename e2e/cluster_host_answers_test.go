package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestClusterHostMisanswers: the host is on instance A, an /agent/ws
// agent on B. A host message that is not a call's answer (a state.updated
// carrying the call's id) and another relay session's host answering the
// call are both refused on A, and B's agent gets nothing from them: its
// call gets the host's real answer. A host that leaves mid-call fails the
// call on B at once, saying the action may or may not have happened.
func TestClusterHostMisanswers(t *testing.T) {
	c := startCluster(t)
	host := joinRelaySession(t, c.srvs[0], "host", "mis")
	other := joinRelaySession(t, c.srvs[0], "host", "mis-other")
	agent := joinRelaySession(t, c.srvs[1], "agent", "mis")

	agent.send("session.start", "s1", map[string]any{"studyId": "pilot", "participantId": "P1"})
	start := host.expect("session.start", 10*time.Second)
	host.reply("session.started", start.ID, map[string]any{})
	agent.expect("session.started", 10*time.Second)

	agent.send("tool.call", "c1", map[string]any{"toolName": "select", "params": map[string]any{"itemId": "m1"}, "reason": "test"})
	call := host.expect("tool.call", 10*time.Second)
	host.replyWithID("state.updated", "w1", call.ID, map[string]any{"uiSpec": map[string]any{"stage": "forged"}})
	if e := host.expect("error", 10*time.Second); e.ReplyTo != "w1" || !strings.Contains(string(e.Payload), "INVALID_MESSAGE") {
		t.Fatalf("the host's state.updated naming the call: %+v", e)
	}
	other.replyWithID("tool.result", "w2", call.ID, map[string]any{"ok": true, "forged": true})
	if e := other.expect("error", 10*time.Second); e.ReplyTo != "w2" || !strings.Contains(string(e.Payload), "INVALID_MESSAGE") {
		t.Fatalf("another session's host answering the call: %+v", e)
	}
	host.reply("tool.result", call.ID, map[string]any{"ok": true, "n": 1})
	if e, err := agent.next(10 * time.Second); err != nil || e.Type != "tool.result" || e.ReplyTo != "c1" || strings.Contains(string(e.Payload), "forged") {
		t.Fatalf("B's agent got %+v (%v), want the host's tool.result first", e, err)
	}

	agent.send("tool.call", "c2", map[string]any{"toolName": "select", "params": map[string]any{"itemId": "m2"}, "reason": "test"})
	host.expect("tool.call", 10*time.Second)
	host.ws.Close()
	for {
		e := agent.expect("error", 10*time.Second)
		if e.ReplyTo == "c2" {
			if !strings.Contains(string(e.Payload), "TOOL_EXECUTION_FAILED") || !strings.Contains(string(e.Payload), "may or may not have happened") {
				t.Fatalf("the call whose host left: %s", e.Payload)
			}
			break
		}
	}
}

// reply sends a host's answer to the request id.
func (p *relayPeer) reply(typ, replyTo string, payload any) { p.replyWithID(typ, "", replyTo, payload) }

func (p *relayPeer) replyWithID(typ, id, replyTo string, payload any) {
	p.t.Helper()
	m := map[string]any{"v": "mvp-0.2", "type": typ, "replyTo": replyTo, "payload": payload}
	if id != "" {
		m["id"] = id
	}
	if err := p.ws.WriteJSON(m); err != nil {
		p.t.Fatal(err)
	}
}
