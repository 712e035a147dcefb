package channel

import (
	"strings"
	"testing"
)

// TestHTMLReplyOfAnyLetters: an HTML-only reply is read whatever its
// letters: some change their length in lower case (the Turkish İ, the
// Kelvin sign K), which once made the places found in the text's lower
// case fall elsewhere in the text: the answer cut or run together, and
// a reply of enough of them panicked the mailbox's watch (the server
// with it, at every look, the reply staying unread).
func TestHTMLReplyOfAnyLetters(t *testing.T) {
	turkish := "İyi, İlerle: İzmir İçin İşi İptal Etme, İstanbul İçin İleri."
	for _, tc := range []struct{ html, want string }{
		{"<div>" + turkish + "</div><div class=\"gmail_quote\">On Fri, aa wrote:<blockquote>Deploy?</blockquote></div>", turkish},
		{"<P>" + strings.Repeat("\u212a", 40) + " ok</P><SCRIPT>steal()</SCRIPT><p>Ship it.</p>", strings.Repeat("\u212a", 40) + " ok\nShip it."},
		{"<p>Ⱥ" + strings.Repeat(" Ⱥ", 30) + "</p><style>p{}</style>Go.", "Ⱥ" + strings.Repeat(" Ⱥ", 30) + "\nGo."},
	} {
		raw := "Content-Type: text/html; charset=utf-8\r\n\r\n" + tc.html
		got := func() (got string) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%.40q: panic: %v", tc.html, r)
				}
			}()
			return replyText([]byte(raw))
		}()
		if got != tc.want {
			t.Errorf("%.40q read as %q, want %q", tc.html, got, tc.want)
		}
	}
}

// TestHTMLReplyQuoteAndComments: an HTML-only reply from Outlook, whose
// quote begins at a div of id divRplyFwdMsg (or appendonsend), answers
// with what was written above it, not the mail it quotes; a comment is
// no text, whatever it holds (a ">" inside once leaked the rest of it);
// an attribute's value holding ">" is no text either.
func TestHTMLReplyQuoteAndComments(t *testing.T) {
	for _, tc := range []struct{ html, want string }{
		{`<html><body><div dir="ltr">Roll back.</div><hr style="display:inline-block;width:98%"><div id="divRplyFwdMsg" dir="ltr"><b>From:</b> agentassistant<br><b>Subject:</b> Deploy?</div><div>Deploy to prod?</div></body></html>`, "Roll back."},
		{`<div>Ship it.</div><div id="appendonsend"></div><div>Deploy to prod?</div>`, "Ship it."},
		{`<p>Yes<!-- if gte mso 9 > <xml>hidden</xml> --> please</p>`, "Yes please"},
		{`<p title="a > b">Go</p>`, "Go"},
	} {
		if got := replyText([]byte("Content-Type: text/html; charset=utf-8\r\n\r\n" + tc.html)); got != tc.want {
			t.Errorf("%.50q read as %q, want %q", tc.html, got, tc.want)
		}
	}
}
