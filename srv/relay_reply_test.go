package srv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestHostAnswerOfAnotherKind: a host message that names a request in
// flight answers it only when it is that request's answer (tool.result
// to a tool.call, snapshot.state to a snapshot.get, ...) or an error.
// Any other (a session.started or state.updated sent with the call's
// id) is refused with INVALID_MESSAGE and goes nowhere: the agent is not
// told its tool call went through when the host never said so, and the
// call still waits for its answer.
func TestHostAnswerOfAnotherKind(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "kinds")
	a := joinAgent(t, url, tokA, "kinds")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"s1","payload":{}}`)
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	a.expect("session.started")

	a.sendJSON(`{"v":"mvp-0.2","type":"tool.call","id":"c1","payload":{"toolName":"select","params":{},"reason":"test"}}`)
	call := h.until("tool.call")
	for i, typ := range []string{"session.started", "state.updated", "snapshot.state", "session.ended", "user.message"} {
		id := fmt.Sprintf("w%d", i)
		h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":%q,"id":%q,"replyTo":%q,"payload":{"text":"hi","uiSpec":{}}}`, typ, id, call["id"]))
		h.expectError(wire.InvalidMessage, id)
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"g1","payload":{}}`)
	get := h.until("snapshot.get")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","id":"w9","replyTo":%q,"payload":{"ok":true}}`, get["id"]))
	h.expectError(wire.InvalidMessage, "w9")

	// The right answers still go, each to its request: the agent got
	// nothing before them.
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":true,"n":1}}`, call["id"]))
	if res := a.expect("tool.result"); res["replyTo"] != "c1" {
		t.Fatalf("the call got %v", res)
	}
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"snapshot.state","replyTo":%q,"payload":{"uiSpec":{}}}`, get["id"]))
	if res := a.expect("snapshot.state"); res["replyTo"] != "g1" {
		t.Fatalf("the snapshot.get got %v", res)
	}
}

// TestHostFailureWithoutWords: a host's tool.result {"ok":false} that
// says nothing more reaches the agent as an error that still says what
// happened (the host reported the tool failed), not an empty message.
func TestHostFailureWithoutWords(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := joinRawHost(t, url, tokA, "mute")
	ui := uiRelayClient(url)
	started := make(chan error, 1)
	go func() {
		_, err := ui.StartSession(context.Background(), &pb.StartSessionRequest{RelaySession: "mute"})
		started <- err
	}()
	start := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	done := make(chan *pb.CallUIToolResponse, 1)
	go func() {
		r, _ := ui.CallUITool(context.Background(), &pb.CallUIToolRequest{RelaySession: "mute", ToolName: "select", ParamsJson: `{}`, Reason: "r"})
		done <- r
	}()
	req := h.until("tool.call")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":false}}`, req["id"]))
	r := <-done
	if e := r.GetError(); e.GetCode() != wire.ToolExecutionFailed || !strings.Contains(e.GetMessage(), "the host reported") {
		t.Fatalf("the agent got %v", e)
	}
}
