package channel

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestTelegram: a question goes to the configured chat as a message with
// an inline keyboard; a tap from another chat answers nothing; a tap in
// the chat answers with that button (the callback is answered saying
// so), and the message is edited to say the question is settled, its
// keyboard removed; a tap after that answers nothing; a reply to a
// question's message answers it with the reply's text.
func TestTelegram(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.ask(tokA, "q-1")
	sent := api.Call(t, "sendMessage", 1)
	if sent["chat_id"] != "42" || sent["parse_mode"] != "HTML" || !strings.HasPrefix(sent["text"], "<b>shop · Claude Code asks</b>\n\nDeploy <b>now</b>?") {
		t.Fatalf("sent %v", sent)
	}
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil || len(kb.InlineKeyboard) != 1 || len(kb.InlineKeyboard[0]) != 3 {
		t.Fatalf("keyboard %s: %v", sent["reply_markup"], err)
	}
	no := kb.InlineKeyboard[0][1]
	// Its index, and the tag naming the question (telegram_tag.go).
	if no.Text != "No" || no.CallbackData != "a:1:"+f.m.seqOf(store.Room(tokA), "q-1") {
		t.Fatalf("button %+v: its data must carry no capability (anyone in the chat can read it)", no)
	}

	// A tap can come only once the message is sent and its id noted.
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, 101}) })
	api.Push(telegramtest.Callback(99, 101, no.CallbackData)) // a stranger's chat
	if got := api.Call(t, "answerCallbackQuery", 1); got["text"] != "This chat may not answer." {
		t.Errorf("a stranger's tap: %v", got)
	}
	api.Push(telegramtest.Callback(42, 101, no.CallbackData))
	if got := api.Call(t, "answerCallbackQuery", 2); got["text"] != "Answered: No" {
		t.Errorf("the tap: %v", got)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" || rep.Door != "telegram" {
		t.Fatalf("the agent got %+v", rep)
	}
	edit := api.Call(t, "editMessageText", 1)
	if edit["message_id"] != "101" || !strings.HasSuffix(edit["text"], "— shop · Answered on Telegram: No") || !strings.Contains(edit["reply_markup"], `"inline_keyboard":[]`) {
		t.Errorf("edit %v", edit)
	}
	api.Push(telegramtest.Callback(42, 101, kb.InlineKeyboard[0][0].CallbackData))
	if got := api.Call(t, "answerCallbackQuery", 3); !strings.Contains(got["text"], "can no longer answer") {
		t.Errorf("a tap after the answer: %v", got)
	}

	second := f.ask(tokA, "q-2")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 2)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	api.Push(telegramtest.Reply(42, 500, msg, "Wait for the review."))
	if rep := answer(t, second); rep == nil || rep.Contents[0].GetText().GetText() != "Wait for the review." || rep.Nickname != "Ana · Telegram" {
		t.Fatalf("the reply: %+v", rep)
	}
}

// tracks: tg has noted what the message k asks.
func (tg *Telegram) tracks(k sentKey) bool {
	_, ok, err := getAsked(context.Background(), tg.notesOf(), tg.noteKey(k))
	return ok && err == nil
}
