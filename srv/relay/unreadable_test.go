package relay

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestUnreadableAnswerFailsInProcessCall: an in-process agent's tool
// call (the MCP agent's, which has no relay deadline, only its caller's)
// whose host answers with a frame that is not UTF-8 gets an error at
// once naming the unreadable answer; it would otherwise wait for its
// caller's deadline (in the bubble: for ever, and the test deadlocks).
func TestUnreadableAnswerFailsInProcessCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		l := r.Local("tok", "s")
		defer l.Close()
		got := make(chan Reply, 1)
		go func() {
			rep, _ := l.Request(t.Context(), wire.TypeToolCall, toolCall)
			got <- rep
		}()
		call := (<-host.replies).Envelope
		for call.Type != wire.TypeToolCall {
			call = (<-host.replies).Envelope
		}
		frame := fmt.Appendf(nil, `{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":true,"text":"caf`+"\xe9"+`"}}`, call.ID)
		_, perr := Parse(frame)
		ch.unreadable(host, frame, "", perr)
		rep := <-got
		if rep.Type != wire.TypeError || !strings.Contains(string(rep.Payload), "could not be read") ||
			!strings.Contains(string(rep.Payload), wire.ToolExecutionFailed) {
			t.Errorf("the agent got %+v", rep)
		}
	})
}
