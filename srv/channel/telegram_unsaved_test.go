package channel

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestTelegramAnswerNotSavedTriedAgain: a reply and a tap whose answer
// the server cannot save for a moment (a cluster's NATS without a
// quorum, a full disk) are taken once it can, not told "Not taken" and
// dropped: the update is handled again, and the tap's capability, not
// used by an answer that was not saved, still answers.
func TestTelegramAnswerNotSavedTriedAgain(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	m := New(Options{Hub: h, Caps: caps, Routes: map[string][]Channel{tokA: {tg}}})
	t.Cleanup(m.Close)
	ask := func(id string) chan *hub.Reply {
		out := make(chan *hub.Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy?",
				Timeout: time.Hour, Questions: nil})
			out <- rep
		}()
		return out
	}
	unsaved := func(push map[string]any) {
		t.Helper()
		shared.fail.Store(true)
		before := shared.refused.Load()
		api.Push(push)
		eventually(t, "the answer refused by the store", func() bool { return shared.refused.Load() > before })
		shared.fail.Store(false)
	}

	answered := ask("q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	unsaved(telegramtest.Reply(42, 500, msg, "Ship it."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}

	answered = ask("q-2")
	msg, _ = strconv.Atoi(api.Call(t, "sendMessage", 2)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	unsaved(telegramtest.Callback(42, msg, "a:0"))
	answer(t, answered)
	if got := api.Call(t, "answerCallbackQuery", 1); !strings.HasPrefix(got["text"], "Answered: ") {
		t.Errorf("the tap was told %q", got["text"])
	}

	for _, said := range api.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
