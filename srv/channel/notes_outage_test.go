package channel

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// outageNotes are the notes of a cluster whose NATS has lost its quorum
// while down is set: every write fails (as JetStream's do then), while
// reads answer from what was written. Written are what the other
// instances read.
type outageNotes struct {
	written *MemoryNotes
	down    atomic.Bool
	// refused counts the writes refused while down.
	refused atomic.Int32
}

func newOutageNotes() *outageNotes { return &outageNotes{written: NewMemoryNotes(nil)} }

var errNoQuorum = errors.New("nats: no quorum: timeout")

func (o *outageNotes) refuse() error {
	if o.down.Load() {
		o.refused.Add(1)
		return errNoQuorum
	}
	return nil
}

func (o *outageNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	if err := o.refuse(); err != nil {
		return err
	}
	return o.written.Put(ctx, key, value, until)
}

func (o *outageNotes) Get(ctx context.Context, key string) ([]byte, bool, error) {
	return o.written.Get(ctx, key)
}

func (o *outageNotes) Delete(ctx context.Context, key string) error {
	if err := o.refuse(); err != nil {
		return err
	}
	return o.written.Delete(ctx, key)
}

// TestTelegramNoteWrittenAfterOutage: a question sent to Telegram just
// as the cluster's NATS loses its quorum cannot be noted then; once
// NATS is back its note is written, where every instance reads it, and
// the person's reply answers it; no one is told it was not taken.
func TestTelegramNoteWrittenAfterOutage(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	notes := newOutageNotes()
	notes.down.Store(true)
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{Notes: notes})

	answered := f.ask(tokA, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	key := tg.noteKey(sentKey{42, msg})
	eventually(t, "the question's notes refused", func() bool { return notes.refused.Load() >= 2 })
	if _, ok, _ := notes.written.Get(t.Context(), key); ok {
		t.Fatal("a note was written while NATS had no quorum")
	}
	notes.down.Store(false)
	eventually(t, "the note written once NATS is back", func() bool {
		_, ok, _ := notes.written.Get(t.Context(), key)
		return ok
	})
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	for _, said := range api.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
