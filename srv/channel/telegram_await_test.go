package channel

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// hidingNotes are a cluster's notes in which some are not there yet, as
// a note another instance keeps until NATS takes it: a key hidden reads
// as absent until it is shown.
type hidingNotes struct {
	Notes
	mu     sync.Mutex
	hidden map[string]bool
	// missed counts the reads of a hidden key.
	missed int
}

func newHidingNotes() *hidingNotes {
	return &hidingNotes{Notes: NewMemoryNotes(nil), hidden: map[string]bool{}}
}

func (h *hidingNotes) hide(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hidden[key] = true
}

func (h *hidingNotes) show(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.hidden, key)
}

func (h *hidingNotes) misses() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.missed
}

func (h *hidingNotes) Get(ctx context.Context, key string) ([]byte, bool, error) {
	h.mu.Lock()
	hidden := h.hidden[key]
	if hidden {
		h.missed++
	}
	h.mu.Unlock()
	if hidden {
		return nil, false, nil
	}
	return h.Notes.Get(ctx, key)
}

const pipeBotToken = "123456:ABC-secret-bot-token"

// pipeTelegram is a Telegram channel of a Manager given notes (a
// cluster's) and the Bot API's double on an in-memory network, for a
// synctest bubble.
func pipeTelegram(t *testing.T, notes Notes) (*telegramtest.API, *Telegram, *hub.Hub, *Manager) {
	t.Helper()
	ln := pipenet.New()
	api := telegramtest.NewOn(pipeBotToken, ln)
	t.Cleanup(api.Close)
	tr := &http.Transport{DialContext: ln.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	tg := &Telegram{BotToken: pipeBotToken, Chats: []int64{42}, ServerURL: api.URL, transport: tr}
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	m := New(Options{Hub: h, Caps: caps, Routes: map[string][]Channel{tokA: {tg}}, Notes: notes})
	t.Cleanup(m.Close)
	return api, tg, h, m
}

// askOn asks the question id of tokA; its answer comes on the channel
// returned (nil once the test ends unanswered).
func askOn(t *testing.T, h *hub.Hub, id string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy now?",
			AgentName: "Claude Code", Timeout: time.Hour})
		out <- rep
	}()
	return out
}

func textOf(rep *hub.Reply) string {
	if rep == nil || len(rep.Contents) == 0 {
		return ""
	}
	return rep.Contents[0].GetText().GetText()
}

// TestTelegramReplyWaitsForItsNote: a reply and a tap to the bot's
// messages whose notes are not in the store yet (kept by the instance
// that sent them until NATS takes them) are held, unconfirmed, and
// taken once the notes are there; the updates after them are handled
// meanwhile; no one is told "Not taken".
func TestTelegramReplyWaitsForItsNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes := newHidingNotes()
		api, tg, h, m := pipeTelegram(t, notes)
		replied, tapped := sentKey{42, telegramtest.FirstMessageID}, sentKey{42, telegramtest.FirstMessageID + 1}
		notes.hide(tg.noteKey(replied))
		notes.hide(tg.noteKey(tapped))
		// The notes its copies' tags name are held back with them.
		notes.hide(tg.tagKey(42, m.seqOf(store.Room(tokA), "q-1")))
		notes.hide(tg.tagKey(42, m.seqOf(store.Room(tokA), "q-2")))
		q1 := askOn(t, h, "q-1")
		api.Call(t, "sendMessage", 1)
		q2 := askOn(t, h, "q-2")
		api.Call(t, "sendMessage", 2)
		q3 := askOn(t, h, "q-3")
		other, _ := strconv.Atoi(api.Call(t, "sendMessage", 3)["sent_message_id"])
		synctest.Wait()

		api.Push(telegramtest.Reply(42, 500, replied.msg, "Ship it."), telegramtest.Callback(42, tapped.msg, "a:0"),
			telegramtest.Reply(42, 501, other, "Roll back."))
		if got := textOf(answer(t, q3)); got != "Roll back." {
			t.Fatalf("the reply after the held ones: the agent got %q", got)
		}
		time.Sleep(10 * time.Second) // a while without the notes
		synctest.Wait()
		if notes.misses() < 4 {
			t.Errorf("the notes were looked up %d times in 10 s", notes.misses())
		}
		select {
		case rep := <-q1:
			t.Fatalf("answered without its note: %+v", rep)
		case rep := <-q2:
			t.Fatalf("answered without its note: %+v", rep)
		default:
		}
		if c := api.Confirmed(); c != 0 {
			t.Errorf("update %d confirmed while the first is held", c)
		}

		notes.show(tg.noteKey(replied))
		notes.show(tg.noteKey(tapped))
		notes.show(tg.tagKey(42, m.seqOf(store.Room(tokA), "q-1")))
		notes.show(tg.tagKey(42, m.seqOf(store.Room(tokA), "q-2")))
		if got := textOf(answer(t, q1)); got != "Ship it." {
			t.Errorf("the held reply: the agent got %q", got)
		}
		if got := textOf(answer(t, q2)); got == "" {
			t.Error("the held tap answered nothing")
		}
		if got := api.Call(t, "answerCallbackQuery", 1)["text"]; !strings.HasPrefix(got, "Answered: ") {
			t.Errorf("the tap was told %q", got)
		}
		time.Sleep(asideMaxRetry)
		synctest.Wait()
		if c := api.Confirmed(); c != 3 {
			t.Errorf("confirmed up to update %d once all were handled, not 3", c)
		}
		for _, said := range api.Said("Not taken") {
			t.Errorf("the person was told %q", said)
		}
	})
}

// TestTelegramReplyWithoutNoteToldAtLast: a reply to one of the bot's
// messages whose note never comes is told "Not taken" once it was
// tried for retryFor, not before, and not in silence.
func TestTelegramReplyWithoutNoteToldAtLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes := newHidingNotes()
		api, tg, h, m := pipeTelegram(t, notes)
		k := sentKey{42, telegramtest.FirstMessageID}
		notes.hide(tg.noteKey(k))
		notes.hide(tg.tagKey(42, m.seqOf(store.Room(tokA), "q-1")))
		askOn(t, h, "q-1")
		api.Call(t, "sendMessage", 1)
		synctest.Wait()

		api.Push(telegramtest.Reply(42, 500, k.msg, "Ship it."))
		time.Sleep(retryFor - time.Second)
		synctest.Wait()
		if said := api.Said("Not taken"); len(said) != 0 {
			t.Fatalf("told before retryFor: %q", said)
		}
		time.Sleep(2*time.Second + asideMaxRetry)
		synctest.Wait()
		if said := api.Said("Not taken"); len(said) != 1 || !strings.Contains(said[0], "asks no pending question") {
			t.Errorf("after retryFor the person was told %q", said)
		}
		if c := api.Confirmed(); c != 1 {
			t.Errorf("confirmed up to %d once told", c)
		}
	})
}

// TestTelegramReplyWithoutNoteAlone: in one process (its own notes) a
// note missing is missing for good: a reply to the bot's message is
// told "Not taken" at once.
func TestTelegramReplyWithoutNoteAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, _, _ := pipeTelegram(t, nil)
		reply := telegramtest.Reply(42, 500, 77, "Ship it.")
		reply["message"].(map[string]any)["reply_to_message"].(map[string]any)["from"] = map[string]any{
			"id": telegramtest.BotID(pipeBotToken), "is_bot": true, "first_name": "Agent Assistant"}
		api.Push(reply)
		synctest.Wait()
		if said := api.Said("Not taken"); len(said) != 1 {
			t.Errorf("the person was told %q", said)
		}
	})
}
