package channel

import "testing"

// TestSlackNotificationSaysWhatIsAsked: a message with blocks is told in
// a phone's notification by its text alone, which said only "shop ·
// Claude Code asks": the notification now carries the question's first
// words too, as a mail's subject does.
func TestSlackNotificationSaysWhatIsAsked(t *testing.T) {
	_, api, _, sl := twoChats(t)
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	// The text goes escaped, as Slack reads it: "&" and "<v2>" shown.
	f.askText(tokA, "q-1", "Deploy **now** & tag <v2>?\n\nThe tests pass.", nil)
	if got := api.Call(t, "chat.postMessage", 1)["text"]; got != "shop · Claude Code asks: Deploy now &amp; tag &lt;v2&gt;? The tests pass." {
		t.Errorf("the notification's text is %q", got)
	}
}
