package channel

import (
	"strconv"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestTelegramTicksSeveral: a question taking several options has a
// keyboard of boxes to tick and a Send button. Send with none ticked is
// refused with a notice; a tap ticks (or unticks) its option, the
// keyboard edited to show it; Send answers with the ticked options, one
// text each in the order offered, as the inbox answers. The ticks live
// in the message's own keyboard, which Telegram hands with each tap:
// nothing else holds them, so another instance (or this one restarted)
// reads the same.
func TestTelegramTicksSeveral(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.askSeveral(tokA, "q-1")
	sent := api.Call(t, "sendMessage", 1)
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			shown = append(shown, b.Text)
			if len(b.CallbackData) > 64 {
				t.Errorf("button %q's data is %d bytes; Telegram takes 1 to 64", b.Text, len(b.CallbackData))
			}
			if !strings.HasSuffix(b.CallbackData, f.m.seqOf(store.Room(tokA), "q-1")) {
				t.Errorf("button %q's data %q lacks the question's tag", b.Text, b.CallbackData)
			}
		}
	}
	if got := strings.Join(shown, "|"); got != "☐ Web|☐ Mobile|☐ Desktop|Send" {
		t.Fatalf("keyboard %q, want a box per option and Send", got)
	}
	if !strings.Contains(sent["text"], "Tick") {
		t.Errorf("the message does not say how to answer: %q", sent["text"])
	}
	send := kb.InlineKeyboard[3][0].CallbackData
	msg, _ := strconv.Atoi(sent["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })

	api.Push(telegramtest.Callback(42, msg, send))
	if got := api.Call(t, "answerCallbackQuery", 1); !strings.Contains(got["text"], "Tick") {
		t.Errorf("Send with none ticked: %v", got)
	}
	tap := func(n int, data, wantNotice, wantKeys string) {
		t.Helper()
		api.Push(telegramtest.Callback(42, msg, data))
		if got := api.Call(t, "answerCallbackQuery", n); got["text"] != wantNotice {
			t.Errorf("tap %d: %v, want %q", n, got, wantNotice)
		}
		edit := api.Call(t, "editMessageReplyMarkup", n-1)
		kb, err := telegramtest.KeyboardOf(edit)
		if err != nil || edit["message_id"] != strconv.Itoa(msg) {
			t.Fatalf("edit %v: %v", edit, err)
		}
		var keys []string
		for _, row := range kb.InlineKeyboard {
			keys = append(keys, row[0].Text)
		}
		if got := strings.Join(keys, "|"); got != wantKeys {
			t.Errorf("tap %d: keyboard %q, want %q", n, got, wantKeys)
		}
	}
	tap(2, kb.InlineKeyboard[2][0].CallbackData, "Ticked: Desktop", "☐ Web|☐ Mobile|☑ Desktop|Send")
	tap(3, kb.InlineKeyboard[0][0].CallbackData, "Ticked: Web", "☑ Web|☐ Mobile|☑ Desktop|Send")
	tap(4, kb.InlineKeyboard[1][0].CallbackData, "Ticked: Mobile", "☑ Web|☑ Mobile|☑ Desktop|Send")
	tap(5, kb.InlineKeyboard[1][0].CallbackData, "Unticked: Mobile", "☑ Web|☐ Mobile|☑ Desktop|Send")
	select {
	case rep := <-answered:
		t.Fatalf("answered by a tick: %+v", rep)
	default:
	}

	api.Push(telegramtest.Callback(42, msg, send))
	if got := api.Call(t, "answerCallbackQuery", 6); got["text"] != "Answered: Web, Desktop" {
		t.Errorf("Send: %v", got)
	}
	if rep := answer(t, answered); texts(rep) != "Web|Desktop" || rep.Door != "telegram" {
		t.Fatalf("the agent got %q, want the ticked options, one text each in the order offered", texts(rep))
	}
	if edit := api.Call(t, "editMessageText", 1); !strings.Contains(edit["reply_markup"], `"inline_keyboard":[]`) {
		t.Errorf("settled: %v", edit)
	}
}

// TestTelegramRepliesSeveral: a reply naming several options of a
// question that takes several answers with those, one text each, as
// the inbox does; words of one's own still answer as they are.
func TestTelegramRepliesSeveral(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	for i, c := range []struct{ reply, want string }{
		{"mobile, web", "Web|Mobile"},
		{"Only the web for now", "Only the web for now"},
	} {
		id := "q-" + strconv.Itoa(i)
		answered := f.askSeveral(tokA, id)
		msg, _ := strconv.Atoi(api.Call(t, "sendMessage", i+1)["sent_message_id"])
		eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
		api.Push(telegramtest.Reply(42, 500+i, msg, c.reply))
		if rep := answer(t, answered); texts(rep) != c.want {
			t.Errorf("reply %q: the agent got %q, want %q", c.reply, texts(rep), c.want)
		}
	}
}

// TestTelegramPlainTicksSeveral: a question taking several options
// whose formatting Telegram refuses goes as plain text saying to tick
// and Send, not to tap an answer, with the same boxes.
func TestTelegramPlainTicksSeveral(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	api.Refuse(func(_ string, form map[string]string) string {
		if strings.Contains(form["text"], "<b>") {
			return "can't parse entities: Unsupported start tag \"b\" at byte offset 0"
		}
		return ""
	})
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	f.askSeveral(tokA, "q-1")
	sent := api.Call(t, "sendMessage", 2)
	if sent["_error"] != "" || !strings.HasSuffix(sent["text"], "Tick the answers, then tap Send; or reply to this message (text or a photo).") {
		t.Errorf("plain message %q (%s), want the hint to tick and Send", sent["text"], sent["_error"])
	}
	if !strings.Contains(sent["reply_markup"], "☐ Web") {
		t.Errorf("keyboard %s, want the boxes", sent["reply_markup"])
	}
}
