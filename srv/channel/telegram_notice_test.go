package channel

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestTelegramNoticeFits: the notice a tap is answered with holds at
// most the 200 characters Telegram takes (answerCallbackQuery), also
// when Send answers with several options as long as a label may be:
// else Telegram refuses it, and the person is told nothing of the
// answer their tap gave.
func TestTelegramNoticeFits(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	var opts []*pb.Option
	for _, region := range []string{"Europe", "Asia", "America"} {
		label := strings.Repeat("Roll out to every cluster in "+region+" ", 3)[:wire.MaxLabelBytes]
		opts = append(opts, &pb.Option{Label: label})
	}
	answered := f.askText(tokA, "q-1", "Where?", []*pb.Question{{Options: opts, Multiple: true}})
	sent := api.Call(t, "sendMessage", 1)
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := strconv.Atoi(sent["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	for i := range opts {
		api.Push(telegramtest.Callback(42, msg, kb.InlineKeyboard[i][0].CallbackData))
		api.Call(t, "answerCallbackQuery", i+1)
		api.Call(t, "editMessageReplyMarkup", i+1)
	}
	api.Push(telegramtest.Callback(42, msg, kb.InlineKeyboard[len(opts)][0].CallbackData))
	if rep := answer(t, answered); len(rep.Contents) != len(opts) {
		t.Fatalf("the agent got %q", texts(rep))
	}
	got := api.Call(t, "answerCallbackQuery", len(opts)+1)
	if n := len(utf16.Encode([]rune(got["text"]))); got["_error"] != "" || n > 200 || !strings.HasPrefix(got["text"], "Answered: ") {
		t.Errorf("Send's notice (%d characters): %v", n, got)
	}
}
