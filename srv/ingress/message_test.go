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
