package ingress

import (
	"strings"
	"testing"
)

// A field of the wrong kind is named with what it must be: a count that
// cannot be negative says so, not "a number" for the number it was given.
func TestParseNamesWhatAFieldMustBe(t *testing.T) {
	for _, c := range []struct{ frame, want string }{
		{`{"type":"hello","last_seq":-5}`, "last_seq must be a whole number of 0 or more, not -5"},
		{`{"type":"hello","last_seq":1.5}`, "last_seq must be a whole number of 0 or more, not 1.5"},
		{`{"type":"hello","last_seq":"7"}`, "last_seq must be a whole number of 0 or more, not a JSON string"},
	} {
		_, err := Parse([]byte(c.frame))
		if err == nil || !strings.Contains(err.Message, c.want) {
			t.Errorf("%s: %v, want it to say %q", c.frame, err, c.want)
		}
	}
}

// A frame that gives a key twice, at any depth or spelt with escapes, has
// no one meaning (encoding/json and JavaScript keep the last, a check may
// read the first): invalid_message, saying which key. So is a number no
// float64 holds.
func TestParseRefusesAmbiguousJSON(t *testing.T) {
	for _, c := range []struct{ frame, want string }{
		{`{"type":"hello","type":"agent_invoke","ts":1,"user_id":"u"}`, `"type" is given more than once`},
		{`{"type":"hello","ts":1,"user_id":"u","user\u005fid":"v"}`, `"user_id" is given more than once`},
		{`{"type":"hello","ts":1,"user_id":"u","client_meta":{"session":"a","session":"b"}}`, `"session" is given more than once`},
		{`{"type":"tool_result","ts":1,"tool_call_id":"tc","ok":true,"result":{"x":{"backendData":"SECRET"},"x":{}}}`, `"x" is given more than once`},
		{`{"type":"tool_result","ts":1,"tool_call_id":"tc","ok":true,"result":{"a":[{"b":{"backendData":"SECRET"}}],"a":0}}`, `"a" is given more than once`},
		{`{"type":"tool_result","ts":1,"tool_call_id":"tc","ok":true,"result":[{"y":1,"\u0079":2}]}`, `"y" is given more than once`},
		{`{"type":"tool_result","ts":1,"tool_call_id":"tc","ok":true,"result":{"n":1e999999}}`, "does not fit a 64-bit float"},
		{`{"type":"agent_invoke","ts":1,"request_id":"r1","message":{"role":"user","content":"a","content":"b"}}`, `"content" is given more than once`},
	} {
		m, err := Parse([]byte(c.frame))
		if err == nil || err.Code != "invalid_message" || !strings.Contains(err.Message, c.want) || strings.Contains(err.Message, "SECRET") {
			t.Errorf("%s: %v, want invalid_message saying %q", c.frame, err, c.want)
		}
		if c.frame[9:14] == "agent" && m.RequestID != "r1" {
			t.Errorf("%s: the error does not name request r1", c.frame)
		}
	}
}
