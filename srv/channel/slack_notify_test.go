package channel

import (
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestSlackNotificationSaysWhatIsAsked: a message with blocks is told in
// a phone's notification by its text alone, which said only "shop ·
// Claude Code asks": the notification now carries the question's first
// words too, as a mail's subject does.
func TestSlackNotificationSaysWhatIsAsked(t *testing.T) {
	const botToken, appToken = "xoxb-5-secret-bot-token", "xapp-5-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	// The text goes escaped, as Slack reads it: "&" and "<v2>" shown.
	f.askText(tokA, "q-1", "Deploy **now** & tag <v2>?\n\nThe tests pass.", nil)
	if got := api.Call(t, "chat.postMessage", 1)["text"]; got != "shop · Claude Code asks: Deploy now &amp; tag &lt;v2&gt;? The tests pass." {
		t.Errorf("the notification's text is %q", got)
	}
}
