package channel

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
)

// TestTLSHintThroughIMAPResponse: go-imap's client formats a failed read
// of a response with %v ("in response: cannot read tag: …"), dropping the
// TLS error from the chain; which read fails first (the greeting's, or
// LOGIN's) depends on timing, so the hint to set tls = "starttls" came
// and went. It is given for the words of the TLS error too.
func TestTLSHintThroughIMAPResponse(t *testing.T) {
	rh := tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}
	for _, err := range []error{
		fmt.Errorf("dial: %w", rh),
		fmt.Errorf("in response: cannot read tag: %v", rh), //nolint:errorlint // as go-imap formats it
	} {
		if h := tlsHint(err, "143", "993"); !strings.Contains(h, "143") || !strings.Contains(h, "993") {
			t.Errorf("tlsHint(%q) = %q, want the ports to use", err, h)
		}
	}
	if h := tlsHint(fmt.Errorf("in response: cannot read tag: EOF"), "143", "993"); h != "" {
		t.Errorf("a closed connection got the TLS hint %q", h)
	}
}

// TestCheckLoginTLSHint: with tls = "tls" at a mailbox that speaks in
// the clear, the client's greeting read fails on the TLS error and the
// client closes the connection; LOGIN then fails with "use of closed
// network connection" or "in response: cannot read tag", by timing.
// Each check says which ports to use.
func TestCheckLoginTLSHint(t *testing.T) {
	box := newIMAPBox(t)
	e := &Email{IMAPAddr: box.addr, IMAPUser: aaAddr, IMAPPassword: imapPass, TLS: "tls"}
	for range 200 {
		err := e.CheckLogin(t.Context())
		if err == nil || !strings.Contains(err.Error(), `"starttls" at its port 143`) {
			t.Fatalf("CheckLogin = %v, want the TLS hint", err)
		}
	}
}
