package channel

import (
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestChatButtonTagsTellNothingOfTheToken: a Telegram or Slack button
// carries its question's tag (telegram_tag.go), which a webhook event or
// an ntfy link shows beside the question's ID. Made of the token's room
// and the ID alone, it let whoever saw both check guesses of a short
// configured token offline; it is keyed with the server's secret, as
// ntfy's sequence ID is: servers of other keys tag the same question of
// the same token differently.
func TestChatButtonTagsTellNothingOfTheToken(t *testing.T) {
	const botToken, slackBot, slackApp = "123456:ABC-secret-bot-token", "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	var tg, sl []string
	for range 2 {
		tapi := telegramtest.Start(t, botToken)
		sapi := slacktest.Start(t, slackBot, slackApp)
		f := newFixture(t, map[string][]Channel{tokA: {
			&Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tapi.URL},
			&Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: sapi.APIURL()},
		}}, Options{})
		f.askChoices(tokA, "r-1")
		kb, err := telegramtest.KeyboardOf(tapi.Call(t, "sendMessage", 1))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := slacktest.BlocksOf(sapi.Call(t, "chat.postMessage", 1))
		if err != nil {
			t.Fatal(err)
		}
		tg = append(tg, tagOfData(kb.InlineKeyboard[0][0].CallbackData))
		sl = append(sl, tagOfData(blocks[1].Elements[0].Value))
		if tg[len(tg)-1] == "" || sl[len(sl)-1] == "" {
			t.Fatalf("no tag in the buttons: Telegram %q, Slack %q", kb.InlineKeyboard[0][0].CallbackData, blocks[1].Elements[0].Value)
		}
	}
	if tg[0] == tg[1] || sl[0] == sl[1] {
		t.Errorf("servers of different keys tag the same question alike (Telegram %q, Slack %q): made of the token and the ID alone", tg, sl)
	}
}
