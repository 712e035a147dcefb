package channel

import (
	"errors"
	"html"
	"strings"

	"github.com/go-telegram/bot"
)

// A question Telegram refuses for its formatting. The HTML is this
// package's and escaped, but Telegram's parser is Telegram's: a tag, an
// entity or a link it takes no more, or a length counted otherwise,
// and the message is refused ("can't parse entities", "message is too
// long") every time it is tried. The person would never see the
// question; it is sent again as text with no tag instead, its links'
// addresses written out (plainLines), its options listed.

// plainHint is the hint, and plainAgain the line that tells the person
// that the copy they read may have an earlier twin, which answers too
// (telegram_tag.go): as text, and in italics in a message with tags
// (italic).
const (
	plainHint = "\n\nTap an answer, or reply to this message (text or a photo)."
	// plainTickHint is plainHint for a question taking several options
	// (telegram_multi.go); the longer, it bounds the question's room.
	plainTickHint = "\n\nTick the answers, then tap Send; or reply to this message (text or a photo)."
	plainAgain    = "\n\nSent again: an earlier copy of this question may be above (the server restarted as it sent it); either answers."
)

// italic is the line s (a blank line, then its words) in italics.
func italic(s string) string { return "\n\n<i>" + strings.TrimPrefix(s, "\n\n") + "</i>" }

// formattingRefused says whether err is Telegram refusing a message for
// its text: what a message with no tag, cut shorter, may get past.
func formattingRefused(err error) bool {
	if !errors.Is(err, bot.ErrorBadRequest) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "parse entities") || strings.Contains(msg, "too long")
}

// telegramPlain is n's question as a message of escaped text with no
// tag, of at most room characters as Telegram counts them (each byte
// is at most one UTF-16 unit).
func telegramPlain(n Notice, room int) string {
	head := title(n) + "\n\n"
	var listed string
	if opts, some := described(n.Request); some {
		listed = "\n"
		for _, o := range opts {
			listed += "\n• " + o.line()
		}
	}
	const cutMark = "\n…\n\n(" + restInApp + ")"
	md := Clip(withoutDataImages(n.Request.Text), 4*maxTelegramText)
	body, cut := clipText(plainLines(md), max(0, min(maxTelegramText, room-len(head)-len(listed)-len(cutMark))))
	if cut {
		body += cutMark
	}
	return html.EscapeString(head + body + listed)
}
