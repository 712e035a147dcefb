package channel

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestMailOfALongLineGoesOut: a question written as one long line (a
// paragraph with no break, a log line) still goes out by mail, whole,
// in lines SMTP takes (RFC 5322: 998 characters at most; the server
// here, as many, refuses longer), and is read back as written.
func TestMailOfALongLineGoesOut(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	f := newFixture(t, map[string][]Channel{tokA: {newEmail(sink, box, io.Discard)}}, Options{})
	line := strings.Repeat("The copy mirrors every write through a trigger, ", 100) + "ünïcödé ✓ 🇺🇦"
	f.askText(tokA, "q-1", line+"\n\nShip it?", nil)
	m, _, body := sink.wait(t, 1)
	for i, l := range bytes.Split(m.data, []byte("\r\n")) {
		if len(l) > 998 {
			t.Fatalf("line %d of the mail is %d bytes", i+1, len(l))
		}
	}
	if !strings.Contains(body, line+"\r\n\r\nShip it?") && !strings.Contains(body, line+"\n\nShip it?") {
		t.Errorf("the mail reads:\n%.300s", body)
	}
}
