package channel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// flakyNotes are notes whose reads of one key fail a few times, as they
// do while the link to NATS is cut.
type flakyNotes struct {
	Notes
	mu    sync.Mutex
	key   string
	fails int
}

func (f *flakyNotes) failNext(key string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.key, f.fails = key, n
}

func (f *flakyNotes) Get(ctx context.Context, key string) ([]byte, bool, error) {
	f.mu.Lock()
	fail := key == f.key && f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return nil, false, errors.New("nats: timeout")
	}
	return f.Notes.Get(ctx, key)
}

// TestTelegramNoteUnreadableTriedAgain: a reply and a tap whose question
// cannot be looked up for a moment (the notes out of reach) are taken
// once it can, not answered "Not taken" and dropped: the update is left
// unconfirmed and handled again.
func TestTelegramNoteUnreadableTriedAgain(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	notes := &flakyNotes{Notes: NewMemoryNotes(nil)}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{Notes: notes})

	answered := f.ask(tokA, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	notes.failNext(tg.noteKey(sentKey{42, msg}), 3)
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}

	answered = f.ask(tokA, "q-2")
	msg, _ = strconv.Atoi(api.Call(t, "sendMessage", 2)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	notes.failNext(tg.noteKey(sentKey{42, msg}), 3)
	api.Push(telegramtest.Callback(42, msg, "a:0"))
	if got := api.Call(t, "answerCallbackQuery", 1); !strings.HasPrefix(got["text"], "Answered: ") {
		t.Errorf("the tap was told %q", got["text"])
	}
	answer(t, answered)

	for _, said := range api.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
