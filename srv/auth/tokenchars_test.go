package auth

import "testing"

// TestCheckRefusesWhatADoorCannotCarry: a token travels in an HTTP header
// (agentassistant-mcp's X-Agentassistant-Token, a browser's fetch for push
// and the booking catalog, Authorization: Bearer from MCP clients), in
// ?token=, and in protobuf strings. A control character is no header
// value (Go's client refuses to send it), bytes that are no UTF-8 are no
// protobuf string, and a browser sends a header's non-ASCII character as
// one Latin-1 byte, never as the UTF-8 the server compares: such a token
// is accepted by the config and refused at some door. Check refuses it,
// so the server does not start with a token that cannot work.
func TestCheckRefusesWhatADoorCannotCarry(t *testing.T) {
	for _, tok := range []string{
		"control\x01chars",
		"escape\x1b[31mred",
		"delete\x7fchar",
		"nul\x00inside",
		"not-utf8-\xff\xfe",
		"päßwörter-1234",
		"令牌令牌令牌令牌",
	} {
		if err := Check(tok); err == nil {
			t.Errorf("Check(%q) accepted a token no header carries as written", tok)
		}
	}
	for _, tok := range []string{Generate(), "correct-horse-battery", "a!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~z"} {
		if err := Check(tok); err != nil {
			t.Errorf("Check(%q) = %v, want accepted", tok, err)
		}
	}
}
