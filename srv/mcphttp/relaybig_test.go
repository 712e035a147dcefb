package mcphttp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestFormAnswerTooLargeToRelay: a client POSTs its form's answer
// through an instance that does not hold the form. One that fits in a
// relayed message is relayed and taken (202 Accepted); one that does
// not is refused, 413 with a JSON-RPC error that says why, and nothing
// is relayed: the client is not told it was taken while it is lost.
func TestFormAnswerTooLargeToRelay(t *testing.T) {
	rb, bases := newRelayPeers(t, 2, newAsker())
	sid := initializeWithForms(t, bases[0], "token-a")
	answer := func(text string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{"answer":"` + text + `"}}}`
	}
	sent := func() int {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		return rb.sent[1]
	}

	if code, body := postIn(t, bases[1], sid, answer("yes")); code != http.StatusAccepted {
		t.Fatalf("a short answer through another instance: %d %s", code, body)
	}
	if n := sent(); n != 1 {
		t.Fatalf("a short answer relayed %d times", n)
	}

	code, body := postIn(t, bases[1], sid, answer(strings.Repeat("y", maxRelay)))
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an answer over %d bytes through another instance: %d %s, want 413", maxRelay, code, body)
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != "null" || m.Error.Code != invalidRequest || !strings.Contains(m.Error.Message, "64 KiB") {
		t.Fatalf("the refusal: %s", body)
	}
	if n := sent(); n != 1 {
		t.Fatalf("the answer too large was relayed (%d messages sent)", n)
	}
}
