package mcphttp

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestEventIDParsesOnlyOurs: a Last-Event-ID is the client's to make up.
// One of the form this server gives is read; any other, whatever it
// bends (many @, empty or foreign-looking tags, numbers past 64 bits, an
// empty signature), is malformed: it is not read as a near miss, whose
// parts would then be carried to the other instances and echoed in the
// IDs of the events sent after it.
func TestEventIDParsesOnlyOurs(t *testing.T) {
	good := []struct {
		id     string
		tag    string
		n      uint64
		origin eventPos
		sig    string
	}{
		{"abcdefghij-5", "abcdefghij", 5, eventPos{}, ""},
		{"abcdefghij-5.c2ln", "abcdefghij", 5, eventPos{}, "c2ln"},
		{"abcdefghij-5@klmnopqrst-0.c2ln", "abcdefghij", 5, eventPos{"klmnopqrst", 0}, "c2ln"},
		{"abcdefghij-18446744073709551615@k2m4o6q7s3-18446744073709551615", "abcdefghij", 1<<64 - 1, eventPos{"k2m4o6q7s3", 1<<64 - 1}, ""},
	}
	for _, c := range good {
		tag, n, origin, sig, err := parseEventIDOrigin(c.id)
		if err != nil || tag != c.tag || n != c.n || origin != c.origin || sig != c.sig {
			t.Errorf("%q: %q %d %+v %q %v", c.id, tag, n, origin, sig, err)
		}
	}
	bad := []string{
		"",
		"abcdefghij",
		"-1",
		"abcdefghij-",
		"abcdefghij-0",
		"abcdefghij-01x",
		"abcdefghij-01",
		"abcdefghij-1@klmnopqrst-00",
		"abcdefghij-+1",
		"abcdefghij-18446744073709551616",
		"abcdefghij-1.",
		"abcdefghij-1@",
		"abcdefghij-1@-2",
		"abcdefghij-1@klmnopqrst-",
		"abcdefghij-1@klmnopqrst-18446744073709551616",
		"abcdefghij-1@klmnopqrst-2@uvwxyz2345-3",
		"abcdefghij-1@klm@nopqrst-2",
		"abcdefghij-1@@klmnopqrst-2",
		"abc@defghij-1",
		"abc defghij-1",
		"abc\tdefghij-1@klm\tnopqrst-2",
		"ABCDEFGHIJ-1",
		"abcdefghij-1@KLMNOPQRST-2",
		"abcdefghij-1@klm:nopqrst-2.c2ln",
		strings.Repeat("a", 400) + "-1",
		"abcdefghij-1@" + strings.Repeat("k", 400) + "-2",
		"abcdefghij-1." + strings.Repeat("s", maxEventID),
	}
	for _, id := range bad {
		if tag, n, origin, sig, err := parseEventIDOrigin(id); !errors.Is(err, errEventMalformed) {
			t.Errorf("%q: read as %q %d %+v %q, %v; want it malformed", id, tag, n, origin, sig, err)
		}
	}
}

// TestLongestEventIDFits: the longest ID a carrier gives (numbers of 64
// bits, a call's id of maxCallID bytes, the run where it began) is one
// a Last-Event-ID may carry: every instance resumes it.
func TestLongestEventIDFits(t *testing.T) {
	s := eventSigner{key: sharedKey, token: "token-a", sid: "sid"}
	sig := s.sign(callClaims{Request: strings.Repeat("f", 24), Kind: wire.TaskFinish, Sum: make([]byte, 32),
		Timeout: math.MaxInt64, Call: []byte(`"` + strings.Repeat("x", maxCallID-2) + `"`), Run: strings.Repeat("f", 24)})
	if sig == "" {
		t.Fatal("the claims were not signed")
	}
	id := "abcdefghij-18446744073709551615@klmnopqrst-18446744073709551615." + sig
	if len(id) > maxEventID {
		t.Fatalf("the longest event ID is %d bytes, over %d", len(id), maxEventID)
	}
	if _, _, _, got, err := parseEventIDOrigin(id); err != nil || got != sig {
		t.Fatalf("the longest event ID does not read back: %v", err)
	}
}
