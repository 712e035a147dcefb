package channel

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestTelegramRefusingTheFormattingStillAsks: Telegram refuses a
// message whose HTML its parser does not take ("can't parse entities":
// a tag, an entity or a link it takes no more). The question then goes
// as plain text with no tag, escaped, its options listed and as
// buttons, rather than not at all; a tap answers with the option's
// exact label, and once settled the message is edited to say so.
func TestTelegramRefusingTheFormattingStillAsks(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	api.Refuse(func(_ string, form map[string]string) string {
		if strings.Contains(form["text"], "<b>") || strings.Contains(form["text"], "<a ") {
			return "can't parse entities: Unsupported start tag \"b\" at byte offset 0"
		}
		return ""
	})
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	opts := []*pb.Option{{Label: "Yes", Description: "ship <it> & see [bank.example](https://evil.example/)"}, {Label: "yes"}, {Label: "No <b>"}}
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1",
			Text:             "## Deploy\n\nShip **v2** to [bank.example](https://evil.example/login) if a < b && c > d?\n\n" + strings.Repeat("The copy mirrors every write. ", 300),
			ProjectDirectory: "/srv/shop", AgentName: "Claude <Code>", Timeout: time.Hour, Questions: []*pb.Question{{Options: opts}}})
		answered <- rep
	}()
	sent := api.Call(t, "sendMessage", 2)
	if sent["_error"] != "" {
		t.Fatalf("the question refused again: %s", sent["_error"])
	}
	text := sent["text"]
	for _, want := range []string{"Claude &lt;Code&gt; asks", "Ship v2 to bank.example (https://evil.example/login) if a &lt; b &amp;&amp; c &gt; d?",
		"Yes — ship &lt;it&gt; &amp; see [bank.example](https://evil.example/)", "No &lt;b&gt;"} {
		if !strings.Contains(text, want) {
			t.Errorf("the plain question lacks %q:\n%s", want, text)
		}
	}
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil || len(kb.InlineKeyboard) != 3 || kb.InlineKeyboard[1][0].Text != "yes" {
		t.Fatalf("keyboard %s: %v", sent["reply_markup"], err)
	}
	eventually(t, "noted what the message's buttons say", func() bool { return tg.tracks(sentKey{42, 101}) })
	api.Push(telegramtest.Callback(42, 101, kb.InlineKeyboard[1][0].CallbackData))
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "yes" {
		t.Fatalf("the agent got %+v", rep)
	}
	edited := api.Call(t, "editMessageText", 1)
	if edited["_error"] != "" || !strings.Contains(edited["text"], "Ship v2 to bank.example") {
		t.Errorf("the settled edit: %q (refused: %s)", edited["text"], edited["_error"])
	}
}
