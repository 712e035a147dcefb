package channel

import (
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestCutQuestionLinksToTheApp: a question too long for its Telegram or
// Slack message says the rest is in the app, and, with public_url set,
// that line opens the app on the question; a bare "the rest is in the
// app" left a person on a phone not knowing where that is.
func TestCutQuestionLinksToTheApp(t *testing.T) {
	tgAPI, slAPI, tg, sl := twoChats(t)
	f := newFixture(t, map[string][]Channel{tokA: {tg, sl}}, Options{})
	f.askText(tokA, "q 1", strings.Repeat("The copy mirrors every write. ", 300), nil)
	app := f.public.URL + "/?request=q+1"
	if got := tgAPI.Call(t, "sendMessage", 1)["text"]; !strings.Contains(got, `<i><a href="`+app+`">The rest is in the app.</a></i>`) {
		t.Errorf("Telegram's message ends:\n%s", got[max(0, len(got)-300):])
	}
	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.postMessage", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := blocks[0].Text.Text; !strings.Contains(got, "(<"+app+"|The rest is in the app.>)") {
		t.Errorf("Slack's message ends:\n%s", got[max(0, len(got)-300):])
	}
}
