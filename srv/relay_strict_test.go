package srv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// ambiguous are payloads that mean one thing to a reader that keeps the
// last of a key given twice (encoding/json, JavaScript) and carry
// backendData in their bytes, or hold a number no float64 holds: each is
// refused wherever JSON comes in, never forwarded or logged.
var ambiguous = []struct{ name, json string }{
	{"top level", `{"uiSpec":{"backendData":"SECRET"},"uiSpec":{"v":1}}`},
	{"nested", `{"uiSpec":{"a":[{"b":{"backendData":"SECRET"}}],"a":0}}`},
	{"inside an array", `{"uiSpec":{"items":[{"id":"m1"},{"x":{"backendData":"SECRET"},"x":{}}]}}`},
	{"escaped key", `{"uiSpec":{"backendData":"SECRET"},"ui\u0053pec":{"v":1}}`},
	{"escaped backendData", `{"uiSpec":{"n":{"backend\u0044ata":"SECRET"},"\u006e":{}}}`},
	{"number overflow", `{"uiSpec":{"n":1e999999,"m":"SECRET"}}`},
	{"long number", `{"uiSpec":{"n":` + strings.Repeat("7", 4096) + `,"m":"SECRET"}}`},
}

// TestRelayRefusesAmbiguousJSON: a host's state.updated, tool.result and
// snapshot.state whose payload is ambiguous (ambiguous) is refused with
// INVALID_MESSAGE; no agent gets it, the study log does not hold it, and
// the request it answered still waits for a good answer. An agent's
// frame is refused the same way.
func TestRelayRefusesAmbiguousJSON(t *testing.T) {
	url, data := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "strict")
	a := joinAgent(t, url, tokA, "strict")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s","payload":{}}`)
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	sid, _ := a.expect("session.started")["payload"].(map[string]any)["sessionId"].(string)

	noSecret := func(what string, m map[string]any) {
		t.Helper()
		if b, _ := json.Marshal(m); strings.Contains(string(b), "SECRET") {
			t.Fatalf("%s reached the agent: %s", what, b)
		}
	}
	for i, c := range ambiguous {
		// state.updated: refused; the good one after it is the next the
		// agent sees.
		bad := fmt.Sprintf("bad-%d", i)
		h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"state.updated","id":%q,"payload":%s}`, bad, c.json))
		refusedAt(t, h, bad)
		h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"state.updated","payload":{"uiSpec":{"mark":%d}}}`, i))
		m := a.until("state.updated")
		noSecret("state.updated "+c.name, m)
		if mark := m["payload"].(map[string]any)["uiSpec"].(map[string]any)["mark"]; mark != float64(i) {
			t.Fatalf("%s: the agent got %v, want the state after the refused one", c.name, m)
		}

		// tool.result and snapshot.state: refused; the call waits for
		// the host's good answer.
		for _, r := range []struct{ ask, typ, reply string }{
			{`{"v":"mvp-0.2","type":"tool.call","id":"c-%d","payload":{"toolName":"select","params":{},"reason":"r"}}`, "tool.call", "tool.result"},
			{`{"v":"mvp-0.2","type":"snapshot.get","id":"c-%d","payload":{}}`, "snapshot.get", "snapshot.state"},
		} {
			a.sendJSON(fmt.Sprintf(r.ask, i))
			req := h.until(r.typ)
			h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":%q,"id":%q,"replyTo":%q,"payload":%s}`, r.reply, bad, req["id"], c.json))
			refusedAt(t, h, bad)
			h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":%q,"replyTo":%q,"payload":{"ok":true,"uiSpec":{"mark":"good"}}}`, r.reply, req["id"]))
			m := a.expect(r.reply)
			noSecret(r.reply+" "+c.name, m)
			if m["replyTo"] != fmt.Sprintf("c-%d", i) || m["payload"].(map[string]any)["uiSpec"].(map[string]any)["mark"] != "good" {
				t.Fatalf("%s %s: the agent got %v, want the good answer", r.reply, c.name, m)
			}
		}

		// An agent's frame: refused, not sent to the host.
		a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.call","id":"a-%d","payload":{"toolName":"select","params":%s,"reason":"r"}}`, i, c.json))
		a.expectError(wire.InvalidMessage, fmt.Sprintf("a-%d", i))
	}
	// Keys equal once unescaped, and a key given twice in the envelope.
	for _, f := range []string{
		`{"v":"mvp-0.2","type":"state.updated","id":"e1","payload":{"uiSpec":{}},"payload":{"uiSpec":{"backendData":"SECRET"}}}`,
		`{"v":"mvp-0.2","type":"state.updated","id":"e1","payload":{"uiSpec":{"backendData":"SECRET"}},"p\u0061yload":{"uiSpec":{}}}`,
		`{"v":"mvp-0.2","type":"state.updated","type":"user.message","id":"e1","payload":{"text":"SECRET"}}`,
	} {
		h.sendJSON(f)
		refusedAt(t, h, "e1")
	}
	h.sendJSON(`{"v":"mvp-0.2","type":"state.updated","payload":{"uiSpec":{"mark":"last"}}}`)
	noSecret("state.updated", a.until("state.updated"))

	a.sendJSON(`{"v":"mvp-0.2","type":"session.end","id":"end","payload":{}}`)
	end := h.until("session.end")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.ended","replyTo":%q,"payload":{}}`, end["id"]))
	a.expect("session.ended")
	raw, err := os.ReadFile(filepath.Join(data, "logs", "study", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "SECRET") || !strings.Contains(string(raw), `"last"`) {
		t.Errorf("the study log holds what was refused, or not what was taken:\n%s", raw)
	}
}

// refusedAt waits for the error answering the host's frame id: an
// INVALID_MESSAGE with a message (pushes between are skipped).
func refusedAt(t *testing.T, h *agent, id string) {
	t.Helper()
	m := h.until("error")
	p, _ := m["payload"].(map[string]any)
	if m["replyTo"] != id || p["code"] != wire.InvalidMessage || p["message"] == "" {
		t.Fatalf("the host got %v, want INVALID_MESSAGE answering %s", m, id)
	}
}

// TestRelayEnvelopeNeedsPayload: the seed's envelope carries payload, an
// object; one without it, or with null, is INVALID_MESSAGE, not read as
// if it had sent {}.
func TestRelayEnvelopeNeedsPayload(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "bare")
	a := joinAgent(t, url, tokA, "bare")
	for _, f := range []string{
		`{"v":"mvp-0.2","type":"snapshot.get","id":"x"}`,
		`{"v":"mvp-0.2","type":"snapshot.get","id":"x","payload":null}`,
		`{"v":"mvp-0.2","type":"snapshot.get","id":"x","replyTo":"y"}`,
	} {
		a.sendJSON(f)
		if p := a.expectError(wire.InvalidMessage, "x"); !strings.Contains(p["message"].(string), "payload") {
			t.Errorf("%s: %v, want a message naming payload", f, p)
		}
	}
	h.sendJSON(`{"v":"mvp-0.2","type":"state.updated","id":"h"}`)
	refusedAt(t, h, "h")
	// Nothing reached the host: the next request it sees is this one.
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"ok","payload":{}}`)
	if req := h.until("snapshot.get"); req["id"] != "ok" {
		t.Fatalf("the host got %v", req)
	}
	// Joining needs it too.
	j := dialAgent(t, url)
	j.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j"}`)
	j.expectError(wire.InvalidMessage, "j")
}

// TestCallUIToolRefusesAmbiguousParams: a UI tool call over Connect
// (SrvUIRelay.CallUITool, as agentassistant-mcp and older bridges send
// it) whose params_json is ambiguous (ambiguous: a key given twice, a
// number no float64 holds) is answered INVALID_PARAMS and never reaches
// the host, as an /agent/ws agent's tool.call is refused; the next good
// call does.
func TestCallUIToolRefusesAmbiguousParams(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "strict-rpc")
	ui := uiRelayClient(url)
	started := make(chan error, 1)
	go func() {
		_, err := ui.StartSession(context.Background(), &pb.StartSessionRequest{RelaySession: "strict-rpc"})
		started <- err
	}()
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	for _, c := range append(ambiguous, struct{ name, json string }{"seat given twice", `{"seat":"A1","seat":"Z9"}`}) {
		r, err := ui.CallUITool(context.Background(), &pb.CallUIToolRequest{RelaySession: "strict-rpc", ToolName: "select", ParamsJson: c.json, Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetError().GetCode() != wire.InvalidParams {
			t.Errorf("%s: %v, want INVALID_PARAMS", c.name, r)
		}
	}
	done := make(chan *pb.CallUIToolResponse, 1)
	go func() {
		r, _ := ui.CallUITool(context.Background(), &pb.CallUIToolRequest{RelaySession: "strict-rpc", ToolName: "select", ParamsJson: `{"seat":"A1"}`, Reason: "good"})
		done <- r
	}()
	// Nothing refused reached the host: the first call it sees is the
	// good one.
	req := h.until("tool.call")
	if p, _ := req["payload"].(map[string]any); p["reason"] != "good" {
		t.Fatalf("the host got %v, want the good call first", req)
	}
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":true}}`, req["id"]))
	if r := <-done; r.GetError() != nil {
		t.Fatalf("the good call: %v", r)
	}
}
