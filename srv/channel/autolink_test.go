package channel

import (
	"strings"
	"testing"
)

// TestAutolinkNotLinkedKeepsItsText: an address in angle brackets that
// a message does not link (another scheme than http(s) or mailto, or
// one that is no URL at all) is still shown, as its text, on Slack and
// Telegram: it was dropped, and the person read "Connect to  first".
func TestAutolinkNotLinkedKeepsItsText(t *testing.T) {
	for _, addr := range []string{"ssh://db.internal:22", "ftp://files.example/dump.sql", "http://evil|bank.example"} {
		md := "Connect to <" + addr + "> first."
		slack, _ := slackQuestion(md, 3000)
		tg, _, _ := telegramQuestion(md, 3000)
		if !strings.Contains(slack, addr) {
			t.Errorf("Slack shows %q for %q", slack, md)
		}
		if !strings.Contains(tg, addr) {
			t.Errorf("Telegram shows %q for %q", tg, md)
		}
	}
}
