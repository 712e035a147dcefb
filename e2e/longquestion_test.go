package e2e

import (
	"strings"
	"testing"
)

// TestLongQuestionThroughMCP: an agent asks, through agentassistant-mcp,
// a question longer than what the server reads of a message whose token
// is only inside it (64 KiB: a long diff, a log). The bridge sent its
// questions with the token only in the message, so the server refused
// every such question with advice meant for a client that cannot send
// the header. It sends the header now; the question is seen and
// answered.
func TestLongQuestionThroughMCP(t *testing.T) {
	s := startServer(t, tokenA)
	roundTrip(t, s, tokenA, "Does this log look right?\n\n"+strings.Repeat("2026-05-01 12:00:00 ok\n", 8<<10))
}
