package channel

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
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

func (o *outageNotes) Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error) {
	if err := o.refuse(); err != nil {
		return false, err
	}
	return o.written.Create(ctx, key, value, until)
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

// TestTelegramNotTakenToldOnce: a reply to a settled question, handled
// by one instance that tells it was not taken and then by another (its
// update polled again after the lead moved), is told once.
func TestTelegramNotTakenToldOnce(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	notes := NewMemoryNotes(nil)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	a := Answers{hub: h, tokens: map[string]string{store.Room(tokA): tokA}}
	var instances []*Telegram
	for range 2 {
		tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
		tg.useNotes(notes)
		instances = append(instances, tg)
	}
	q := asked{Room: store.Room(tokA), Kind: wire.AskQuestion, ID: "q-1", Gone: "Answered"}
	if err := putJSON(t.Context(), notes, instances[0].noteKey(sentKey{42, 101}), q, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	reply := &models.Message{ID: 500, Chat: models.Chat{ID: 42}, Text: "Roll back!",
		ReplyToMessage: &models.Message{ID: 101, Chat: models.Chat{ID: 42}, From: &models.User{ID: instances[0].botID(), IsBot: true}}}
	for _, tg := range instances {
		b, err := tg.client()
		if err != nil {
			t.Fatal(err)
		}
		tg.replied(t.Context(), b, reply, a)
	}
	if said := api.Said("Not taken"); len(said) != 1 {
		t.Errorf("told %d times: %q", len(said), said)
	}
}
