package channel

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTLSHintThroughAnyWrapping: a TLS handshake answered in the clear
// is told how to fix [channels.email] tls however the mail library
// passes the handshake's error on: wrapped (%w), or written into its own
// (the IMAP client's "in response: cannot read tag: tls: first record
// does not look like a TLS handshake", which -check-channels showed
// without the hint when the handshake failed inside a read).
func TestTLSHintThroughAnyWrapping(t *testing.T) {
	rh := tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}
	for _, err := range []error{
		fmt.Errorf("dial: %w", rh),
		fmt.Errorf("in response: cannot read tag: %v", rh), //nolint:errorlint // unwrapped, as go-imap writes it
		errors.New("in response: cannot read tag: tls: first record does not look like a TLS handshake"),
	} {
		if h := tlsHint(err, "143", "993"); !strings.Contains(h, `tls = "starttls" at its port 143`) {
			t.Errorf("tlsHint(%q) = %q", err, h)
		}
	}
	if h := tlsHint(errors.New("connection refused"), "143", "993"); h != "" {
		t.Errorf("a refused connection hinted %q", h)
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
