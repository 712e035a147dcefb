package channel

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// repliesTo reads which message a sendMessage call replies to.
func repliesTo(form map[string]string) string {
	_, after, _ := strings.Cut(form["reply_parameters"], `"message_id":`)
	end := strings.IndexAny(after, ",}")
	if end < 0 {
		return ""
	}
	return after[:end]
}

// TestTelegramRepliesNotLost: what a person writes back in the chat is
// never dropped without a word: a reply to one of the question's photos
// answers the question; a reply it cannot take (a sticker) or to a
// question no longer pending is answered "Not taken" with the reason; a
// reply to a message that is not the bot's changes nothing and says
// nothing.
func TestTelegramRepliesNotLost(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", AgentName: "Claude Code",
			Text: "Which one?\n\n![the old layout](data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG(t)) + ")", Timeout: time.Hour})
		answered <- rep
	}()
	question, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	photo, _ := strconv.Atoi(api.Call(t, "sendPhoto", 1)["sent_message_id"])
	eventually(t, "noted what the photo asks", func() bool { return tg.tracks(sentKey{42, photo}) })

	sticker := telegramtest.Reply(42, 500, question, "")
	sticker["message"].(map[string]any)["sticker"] = map[string]any{"file_id": "st-1", "file_unique_id": "s1", "type": "regular", "width": 512, "height": 512}
	api.Push(sticker)
	if got := api.Call(t, "sendMessage", 2); repliesTo(got) != "500" || !strings.Contains(got["text"], "Not taken") || !strings.Contains(got["text"], "text or a photo") {
		t.Errorf("a sticker's reply: %v", got)
	}

	api.Push(telegramtest.Reply(42, 501, photo, "That one."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "That one." {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Call(t, "editMessageText", 1)

	api.Push(telegramtest.Reply(42, 502, 400, "A reply to my own note.")) // 400 is not the bot's
	api.Push(telegramtest.Reply(42, 503, question, "Also, tell Bo."))
	if got := api.Call(t, "sendMessage", 3); repliesTo(got) != "503" || !strings.Contains(got["text"], "Not taken") || !strings.Contains(got["text"], "asks no pending question") {
		t.Errorf("a reply to a settled question: %v", got)
	}
}

// TestTelegramTapOnOldMessage: Telegram hands a tap on a message older
// than 48 hours with the message "inaccessible" (its chat and ID, date
// 0); in a configured chat it still answers the question it asks.
func TestTelegramTapOnOldMessage(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.ask(tokA, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	old := telegramtest.Callback(99, msg, "a:1") // a stranger's, first
	old["callback_query"].(map[string]any)["message"] = map[string]any{"message_id": msg, "date": 0, "chat": map[string]any{"id": 99, "type": "private"}}
	api.Push(old)
	if got := api.Call(t, "answerCallbackQuery", 1); got["text"] != "This chat may not answer." {
		t.Errorf("a stranger's tap: %v", got)
	}
	old = telegramtest.Callback(42, msg, "a:1")
	old["callback_query"].(map[string]any)["message"] = map[string]any{"message_id": msg, "date": 0, "chat": map[string]any{"id": 42, "type": "private"}}
	api.Push(old)
	if got := api.Call(t, "answerCallbackQuery", 2); got["text"] != "Answered: No" {
		t.Errorf("the tap: %v", got)
	}
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "No" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestTelegramReplyFileLeftOutSaid: a reply with a file an answer cannot
// hold (a document, a video, a voice note) and a caption answers with the
// caption, and the chat is told the file was left out: the person does
// not believe the agent has it.
func TestTelegramReplyFileLeftOutSaid(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.ask(tokA, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	doc := telegramtest.Reply(42, 600, msg, "")
	m := doc["message"].(map[string]any)
	delete(m, "text")
	m["caption"] = "The log is attached."
	m["document"] = map[string]any{"file_id": "doc-1", "file_unique_id": "d1", "file_name": "build.log"}
	api.Push(doc)
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "The log is attached." {
		t.Fatalf("the agent got %+v", rep)
	}
	if got := api.Call(t, "sendMessage", 2); repliesTo(got) != "600" || !strings.Contains(got["text"], "left out") {
		t.Errorf("the chat was told %v", got)
	}
}

// TestTelegramTakenTwiceIsNoComplaint: an update read twice (polled
// again after the lead moved to another instance, before its offset was
// confirmed) is the person's own answer, accepted: a reply is not told
// "Not taken", a tap is told "Answered".
func TestTelegramTakenTwiceIsNoComplaint(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.ask(tokA, "q-1")
	question, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, question}) })
	api.Push(telegramtest.Reply(42, 500, question, "Ship it."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Push(telegramtest.Reply(42, 500, question, "Ship it.")) // the same update, again
	api.Push(telegramtest.Reply(42, 501, question, "Also, tell Bo."))
	if got := api.Call(t, "sendMessage", 2); repliesTo(got) != "501" {
		t.Errorf("told %q in reply to %s; the first answer again is no complaint", got["text"], repliesTo(got))
	}

	answered = f.ask(tokA, "q-2")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 3)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	api.Push(telegramtest.Callback(42, msg, "a:0"))
	answer(t, answered)
	api.Push(telegramtest.Callback(42, msg, "a:0"))
	if got := api.Call(t, "answerCallbackQuery", 2); !strings.HasPrefix(got["text"], "Answered: ") {
		t.Errorf("the same tap again was told %q", got["text"])
	}
}
