package srv_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestHostBadFrameFailsItsCall: a host whose answer to a tool call is a
// frame the relay cannot read (not UTF-8, not JSON) is told so with
// INVALID_MESSAGE, and the call it names fails at once, in words naming
// the host's bad frame, rather than waiting out its deadline as if the
// host had said nothing. The deadline here is an hour: a call still
// waiting would fail the test.
func TestHostBadFrameFailsItsCall(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{CallTimeout: time.Hour})
	h := joinRawHost(t, url, tokA, "garbled")
	a := joinAgent(t, url, tokA, "garbled")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	a.expect("session.started")
	for i, frame := range []func(id string) []byte{
		func(id string) []byte { // Latin-1 in a string
			return fmt.Appendf(nil, `{"v":"mvp-0.2","type":"tool.result","id":"r1","replyTo":%q,"payload":{"ok":true,"text":"caf`+"\xe9"+`"}}`, id)
		},
		func(id string) []byte { // cut short
			return fmt.Appendf(nil, `{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":tr`, id)
		},
	} {
		callID := fmt.Sprintf("c%d", i)
		a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"` + callID + `","payload":{"toolName":"select","params":{},"reason":"test"}}`)
		call := h.until("tool.call")
		if err := h.ws.WriteMessage(websocket.TextMessage, frame(call["id"].(string))); err != nil {
			t.Fatal(err)
		}
		t.Logf("host told %v", h.expectError(wire.InvalidMessage, ""))
		p := a.expectError(wire.ToolExecutionFailed, callID)
		if msg := p["message"].(string); !strings.Contains(msg, "host") || !strings.Contains(msg, "could not be read") {
			t.Errorf("the agent is told %q", msg)
		}
	}
}
