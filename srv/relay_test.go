package srv_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/testhost"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestSeedExamples sends the seed's section 4 envelopes, as written there,
// and checks the seed's replies.
func TestSeedExamples(t *testing.T) {
	url, data := newRelayServer(t, relay.Options{})
	hostFor(t, url, tokA, testhost.Options{})
	a := joinAgent(t, url, tokA, "default")

	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"req-001","payload":{"studyId":"pilot-01","participantId":"P07"}}`)
	st := a.expect("session.started")
	sid, _ := st["payload"].(map[string]any)["sessionId"].(string)
	if st["replyTo"] != "req-001" || !regexp.MustCompile(`^s-\d{8}-001$`).MatchString(sid) {
		t.Fatalf("session.started = %v", st)
	}

	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"req-002","payload":{}}`)
	snap := a.expect("snapshot.state")
	sp := snap["payload"].(map[string]any)
	if snap["replyTo"] != "req-002" || sp["sessionId"] != sid || sp["uiSpec"] == nil || sp["messageHistory"] == nil || sp["toolSchema"] == nil {
		t.Fatalf("snapshot.state = %v", snap)
	}
	if _, leaked := sp["uiSpec"].(map[string]any)["backendData"]; leaked {
		t.Fatal("backendData reached the agent in snapshot.state")
	}

	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first available movie option to continue the flow."}}`)
	res := a.expect("tool.result")
	rp := res["payload"].(map[string]any)
	if res["replyTo"] != "req-003" || rp["ok"] != true || rp["toolName"] != "select" {
		t.Fatalf("tool.result = %v", res)
	}
	if spec := rp["uiSpec"].(map[string]any); spec["backendData"] != nil || spec["selections"].(map[string]any)["movie"] != "m1" {
		t.Fatalf("tool.result uiSpec = %v", spec)
	}

	a.sendJSON(`{"v":"mvp-0.2","type":"agent.message","id":"req-004","payload":{"text":"I will choose a date next to narrow available showtimes."}}`)
	// The host shows it; its state.updated carries it in messageHistory.
	for {
		m := <-a.in
		if m["type"] != "state.updated" {
			continue
		}
		hist, _ := json.Marshal(m["payload"].(map[string]any)["messageHistory"])
		if strings.Contains(string(hist), "narrow available showtimes") {
			if m["payload"].(map[string]any)["uiSpec"].(map[string]any)["backendData"] != nil {
				t.Fatal("backendData in state.updated")
			}
			break
		}
	}

	a.sendJSON(`{"v":"mvp-0.2","type":"session.end","id":"req-999","payload":{"reason":"study-complete"}}`)
	end := a.expect("session.ended")
	ep := end["payload"].(map[string]any)
	if end["replyTo"] != "req-999" || ep["sessionId"] != sid || ep["logFile"] != "logs/study/"+sid+".jsonl" || ep["stateReset"] != true {
		t.Fatalf("session.ended = %v", end)
	}

	events := readLog(t, filepath.Join(data, filepath.FromSlash(ep["logFile"].(string))))
	wantTypes := []string{"session.start", "session.started", "snapshot.get", "snapshot.state", "tool.call", "tool.result",
		"agent.message", "session.end", "session.ended"}
	var got []string
	for i, e := range events {
		if int(e["eventIndex"].(float64)) != i || e["sessionId"] != sid {
			t.Errorf("event %d: %v", i, e)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", e["timestamp"].(string)); err != nil {
			t.Errorf("event %d timestamp %v", i, e["timestamp"])
		}
		switch e["direction"] {
		case "in", "out", "internal":
		default:
			t.Errorf("event %d direction %v", i, e["direction"])
		}
		if e["payload"] == nil || e["type"] == "" {
			t.Errorf("event %d: %v", i, e)
		}
		if e["type"] != "state.updated" {
			got = append(got, e["type"].(string))
		}
	}
	if strings.Join(got, ",") != strings.Join(wantTypes, ",") {
		t.Errorf("logged %v, want %v (plus state.updated)", got, wantTypes)
	}
	raw, _ := os.ReadFile(filepath.Join(data, filepath.FromSlash(ep["logFile"].(string))))
	if strings.Contains(string(raw), "backendData") || strings.Contains(string(raw), "secret-seat-map") || strings.Contains(string(raw), tokA) {
		t.Error("the study log holds backendData or the token")
	}
}

// TestErrorCodes produces every error code from the input that should
// produce it; none closes the connection.
func TestErrorCodes(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	a := joinAgent(t, url, tokA, "codes")

	a.sendJSON(`{not json`)
	a.expectError(wire.InvalidMessage, "")
	a.sendJSON(`{"v":"mvp-0.1","type":"snapshot.get","id":"e1","payload":{}}`)
	a.expectError(wire.InvalidMessage, "e1")
	a.sendJSON(`{"v":"mvp-0.2","id":"e2","payload":{}}`)
	a.expectError(wire.InvalidMessage, "e2")
	a.sendJSON(`{"v":"mvp-0.2","type":42,"id":"e3"}`)
	a.expectError(wire.InvalidMessage, "e3")
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e4","payload":[1,2]}`)
	a.expectError(wire.InvalidMessage, "e4")
	a.sendJSON(`{"v":"mvp-0.2","type":"launch.missiles","id":"e5","payload":{}}`)
	a.expectError(wire.InvalidMessage, "e5")
	if err := a.ws.WriteMessage(websocket.TextMessage, []byte("{\"v\":\"mvp-0.2\",\"type\":\"x\xff\"}")); err != nil {
		t.Fatal(err)
	}
	a.expectError(wire.InvalidMessage, "")
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e6","payload":{"toolName":"select","params":{"itemId":"m1"}}}`)
	a.expectError(wire.InvalidParams, "e6")
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e7","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"   "}}`)
	a.expectError(wire.InvalidParams, "e7")

	// No host: answered at once, NO_ACTIVE_SPEC (a call left to its
	// deadline would end TOOL_EXECUTION_FAILED).
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e8","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`)
	a.expectError(wire.NoActiveSpec, "e8")

	hostFor(t, url, tokA, testhost.Options{Session: "codes"})
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e9","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`)
	a.expectError(wire.SessionNotActive, "e9")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	a.expect("session.started")
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e10","payload":{"toolName":"setQuantity","params":{"quantity":2},"reason":"r"}}`)
	p := a.expectError(wire.UnknownTool, "e10")
	if !strings.Contains(p["message"].(string), "allowed now: select, next, postMessage") {
		t.Errorf("UNKNOWN_TOOL message should list the allowed tools: %v", p)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e11","payload":{"toolName":"select","params":{"itemId":"nope"},"reason":"r"}}`)
	a.expectError(wire.InvalidParams, "e11")
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"e12","payload":{"toolName":"next","params":{},"reason":"r"}}`)
	a.expectError(wire.ToolExecutionFailed, "e12")
	// Still joined and working after all of it.
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"ok1","payload":{"toolName":"select","params":{"itemId":"m2"},"reason":"r"}}`)
	if r := a.expect("tool.result"); r["replyTo"] != "ok1" {
		t.Fatalf("after errors: %v", r)
	}
}

func TestJoinGuards(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{JoinTimeout: 300 * time.Millisecond})
	// Anything before relay.join is refused; the connection closes at the
	// join deadline.
	a := dialAgent(t, url)
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"x1","payload":{}}`)
	a.expectError(wire.InvalidMessage, "x1")
	select {
	case _, ok := <-a.in:
		if ok {
			t.Fatal("got a frame instead of the close")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("not closed after the join deadline")
	}
	for _, tok := range []string{"", "wrong-token-123", tokA + "x", tokA[:len(tokA)-1]} {
		b := dialAgent(t, url)
		b.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"` + tok + `"}}`)
		b.expectError(wire.InvalidMessage, "j")
		if _, ok := <-b.in; ok {
			t.Errorf("token %q: connection not closed", tok)
		}
	}
	c := dialAgent(t, url)
	c.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"spy","token":"` + tokA + `"}}`)
	c.expectError(wire.InvalidMessage, "j")
	c.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j2","payload":{"role":"agent","sessionId":"../../etc","token":"` + tokA + `"}}`)
	c.expectError(wire.InvalidMessage, "j2")
}

// TestHostTakeoverAndDisconnect: a newer host takes over and the older is
// told; a host vanishing mid-call fails the call at once.
func TestHostTakeoverAndDisconnect(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	old := hostFor(t, url, tokA, testhost.Options{})
	a := joinAgent(t, url, tokA, "default")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	a.expect("session.started")

	hostFor(t, url, tokA, testhost.Options{DropOn: "next"})
	select {
	case <-old.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the older host was not closed")
	}
	told := false
	for _, m := range old.Seen() {
		if m["type"] == "relay.replaced" {
			told = true
		}
	}
	if !told {
		t.Error("the older host was not told it was replaced")
	}
	// The session carries on with the new host.
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c1","payload":{"toolName":"select","params":{"itemId":"m3"},"reason":"r"}}`)
	a.expect("tool.result")

	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c2","payload":{"toolName":"next","params":{},"reason":"r"}}`)
	p := a.expectError(wire.ToolExecutionFailed, "c2")
	// Told of the disconnect, not left to the call's deadline.
	if !strings.Contains(p["message"].(string), "disconnected before answering; the action may or may not have happened") {
		t.Errorf("mid-call disconnect: %v", p)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"c3","payload":{}}`)
	a.expectError(wire.NoActiveSpec, "c3")
}

// TestTwoAgentsAndIsolation: replies go to the agent that asked, even when
// both use the same id; pushes reach both; another token sees nothing.
func TestTwoAgentsAndIsolation(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := hostFor(t, url, tokA, testhost.Options{})
	a := joinAgent(t, url, tokA, "default")
	b := joinAgent(t, url, tokA, "default")
	x := joinAgent(t, url, tokB, "default")

	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"same","payload":{}}`)
	if m := a.expect("session.started"); m["replyTo"] != "same" {
		t.Fatalf("a: %v", m)
	}
	if m := b.expect("session.started"); m["replyTo"] != nil {
		t.Fatalf("b sees the start as a push: %v", m)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"same","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"a"}}`)
	b.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"same","payload":{"toolName":"select","params":{"itemId":"m2"},"reason":"b"}}`)
	ra, rb := a.expect("tool.result"), b.expect("tool.result")
	if ra["replyTo"] != "same" || rb["replyTo"] != "same" {
		t.Fatalf("replies: %v / %v", ra, rb)
	}
	h.SayUser("I prefer evening showtimes.")
	for _, ag := range []*agent{a, b} {
		m := ag.expect("user.message")
		if p := m["payload"].(map[string]any); p["text"] != "I prefer evening showtimes." || p["stage"] != "movie" {
			t.Errorf("user.message = %v", m)
		}
	}
	x.quiet(300 * time.Millisecond)
	x.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"peek","payload":{}}`)
	x.expectError(wire.NoActiveSpec, "peek")
}

func TestOversizedFrame(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{MaxFrame: 1024})
	a := joinAgent(t, url, tokA, "default")
	b := joinAgent(t, url, tokA, "default")
	a.sendJSON(`{"v":"mvp-0.2","type":"agent.message","payload":{"text":"` + strings.Repeat("x", 2048) + `"}}`)
	for range a.in {
	}
	if !websocket.IsCloseError(a.endErr, websocket.CloseMessageTooBig) {
		t.Errorf("oversized frame: %v, want close 1009", a.endErr)
	}
	b.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"still","payload":{}}`)
	b.expectError(wire.NoActiveSpec, "still")
}

// TestHostComesBack: a host that drops and rejoins within the grace
// resumes the same study session; one that stays away past it ends the
// session, and its log is closed.
func TestHostComesBack(t *testing.T) {
	url, data := newRelayServer(t, relay.Options{HostGrace: 300 * time.Millisecond})
	h := hostFor(t, url, tokA, testhost.Options{})
	a := joinAgent(t, url, tokA, "default")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	sid := a.expect("session.started")["payload"].(map[string]any)["sessionId"].(string)

	h.Close()
	a.waitPresence(false)
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c1","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`)
	a.expectError(wire.NoActiveSpec, "c1") // at once, while it is away
	hostFor(t, url, tokA, testhost.Options{})
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c2","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`)
	if r := a.expect("tool.result"); r["replyTo"] != "c2" {
		t.Fatalf("after the host came back: %v", r)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"g","payload":{}}`)
	if p := a.expect("snapshot.state")["payload"].(map[string]any); p["sessionId"] != sid {
		t.Fatalf("session after the host came back: %v", p["sessionId"])
	}

	// Now it goes for good.
	closeHosts(t)
	end := a.expect("session.ended")
	if p := end["payload"].(map[string]any); p["sessionId"] != sid || p["reason"] != "host_gone" || p["stateReset"] != true {
		t.Fatalf("session.ended = %v", end)
	}
	events := readLog(t, filepath.Join(data, "logs", "study", sid+".jsonl"))
	if last := events[len(events)-1]; last["type"] != "session.ended" || last["direction"] != "internal" {
		t.Errorf("last logged event = %v", last)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c3","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`)
	a.expectError(wire.NoActiveSpec, "c3")
}
