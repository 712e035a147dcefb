package channel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// fullDiskNotes are one process's notes on a disk that is full while
// full is set: every write fails as bbolt's commit does then, while
// what was written before is read.
type fullDiskNotes struct {
	*MemoryNotes
	full atomic.Bool
}

func (*fullDiskNotes) oneProcess() {}

func (f *fullDiskNotes) refuse() error {
	if f.full.Load() {
		return fmt.Errorf("keep a note: %w", syscall.ENOSPC)
	}
	return nil
}

func (f *fullDiskNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	if err := f.refuse(); err != nil {
		return err
	}
	return f.MemoryNotes.Put(ctx, key, value, until)
}

func (f *fullDiskNotes) Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error) {
	if err := f.refuse(); err != nil {
		return false, err
	}
	return f.MemoryNotes.Create(ctx, key, value, until)
}

func (f *fullDiskNotes) Delete(ctx context.Context, key string) error {
	if err := f.refuse(); err != nil {
		return err
	}
	return f.MemoryNotes.Delete(ctx, key)
}

// unnotedManager is a Manager of channels whose notes are on a disk
// that has been full for a while, long enough that the notes waiting to
// be written fill what the server keeps of them in memory: a question
// sent now cannot be noted at all.
func unnotedManager(t *testing.T, h *hub.Hub, ch Channel) {
	t.Helper()
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	notes := &fullDiskNotes{MemoryNotes: NewMemoryNotes(nil)}
	m := New(Options{Hub: h, Caps: caps, Notes: notes, Routes: map[string][]Channel{tokA: {ch}}})
	t.Cleanup(m.Close)
	notes.full.Store(true)
	for i := range maxLaterNotes {
		if err := m.o.Notes.Put(context.Background(), "earlier."+strconv.Itoa(i), []byte("{}"), time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("note %d not kept: %v", i, err)
		}
	}
	if err := m.o.Notes.Put(context.Background(), "one more", []byte("{}"), time.Now().Add(time.Hour)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a note past the bound: %v, want refused", err)
	}
	go func() {
		_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
	}()
}

// toldTruth checks what a reply or a tap on the message of a question
// that could not be noted, and still waits, was told.
func toldTruth(t *testing.T, h *hub.Hub, told string) {
	t.Helper()
	if _, _, waits := h.Waiting(tokA, "q-1"); !waits {
		t.Fatal("the question no longer waits")
	}
	if strings.Contains(told, "no pending question") || strings.Contains(told, "can no longer answer") ||
		!strings.Contains(told, "not noted") && !strings.Contains(told, "could not be noted") || !strings.Contains(told, "answer it in the app") {
		t.Errorf("an answer to a question still waiting was told %q", told)
	}
}

// TestTelegramReplyToUnnotedQuestionIsToldTheTruth: a reply to the
// message of a question that could not be noted, and a tap on its
// button, cannot be matched to the question; but the person is not told
// the message "asks no pending question", or that the button "can no
// longer answer", while it waits: they are told its question may not
// have been noted, and to answer in the app, where it is still pending.
func TestTelegramReplyToUnnotedQuestionIsToldTheTruth(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	unnotedManager(t, h, &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL})

	sent := api.Call(t, "sendMessage", 1)
	msg, _ := strconv.Atoi(sent["sent_message_id"])
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	told := api.Call(t, "sendMessage", 2)["text"]
	if !strings.HasPrefix(told, "Not taken: ") {
		t.Errorf("the reply was told %q", told)
	}
	toldTruth(t, h, told)

	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	api.Push(telegramtest.Callback(42, msg, kb.InlineKeyboard[0][0].CallbackData))
	toldTruth(t, h, api.Call(t, "answerCallbackQuery", 1)["text"])
}

// TestSlackReplyToUnnotedQuestionIsToldTheTruth: the same for a reply in
// the thread of a question's Slack message.
func TestSlackReplyToUnnotedQuestionIsToldTheTruth(t *testing.T) {
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	unnotedManager(t, h, &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()})

	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	if err := api.Send(t.Context(), "events_api", slacktest.ThreadReply("U42", "D42", ts, "Ship it.")); err != nil {
		t.Fatal(err)
	}
	told := api.Call(t, "chat.postMessage", 2)["text"]
	if !strings.HasPrefix(told, "Not taken: ") {
		t.Errorf("the reply was told %q", told)
	}
	toldTruth(t, h, told)
}
