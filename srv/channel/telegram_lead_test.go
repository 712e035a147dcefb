package channel_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// gateNotes are notes whose reads, once armed, wait for release (or
// their context), as a read of a NATS that has gone slow does.
type gateNotes struct {
	channel.Notes
	mu      sync.Mutex
	key     string        // the key whose next read waits; "" none
	entered chan struct{} // closed when a read waits at the gate
	open    chan struct{} // closed to let it through
}

func newGateNotes(n channel.Notes) *gateNotes {
	return &gateNotes{Notes: n, entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *gateNotes) arm(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.key = key
}

func (g *gateNotes) Get(ctx context.Context, key string) ([]byte, bool, error) {
	g.mu.Lock()
	armed := g.key != "" && g.key == key
	if armed {
		g.key = ""
	}
	g.mu.Unlock()
	if armed {
		close(g.entered)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	return g.Notes.Get(ctx, key)
}

// handLeader leads when the test says (lead closed) and until it says
// the lead is lost (lost closed); then never again.
type handLeader struct{ lead, lost chan struct{} }

func newHandLeader() *handLeader {
	return &handLeader{lead: make(chan struct{}), lost: make(chan struct{})}
}

func (l *handLeader) Lead(ctx context.Context, _ string, run func(ctx context.Context)) {
	select {
	case <-l.lead:
	case <-ctx.Done():
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Ends the run when the lead is lost; ends with it otherwise.
	go func() {
		select {
		case <-l.lost:
		case <-rctx.Done():
		}
		cancel()
	}()
	run(rctx)
	<-ctx.Done()
}

// TestTelegramLeadLostMidReply: the instance that polls the bot loses
// its lead while it handles a person's replies (its link to NATS slow,
// the lease not renewed in time). No reply is lost: the one it was
// handling is answered, the ones it had not handled yet are left to
// Telegram for the next poller, and no one is told a reply was not
// taken.
func TestTelegramLeadLostMidReply(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	gate := newGateNotes(a.ch)
	la, lb := newHandLeader(), newHandLeader()
	close(la.lead)
	tgA := &channel.Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	ma := channel.New(channel.Options{Hub: a.hub, Caps: a.caps, Routes: map[string][]channel.Channel{tokA: {tgA}}, Notes: gate, Leader: la})
	t.Cleanup(ma.Close)
	tgB := &channel.Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	mb := channel.New(channel.Options{Hub: b.hub, Caps: b.caps, Routes: map[string][]channel.Channel{tokA: {tgB}}, Notes: b.ch, Leader: lb})
	t.Cleanup(mb.Close)

	ids := []string{"q-1", "q-2", "q-3"}
	var msgs []int
	var answers []chan *hub.Reply
	for i, id := range ids {
		answers = append(answers, askOn(a.hub, id))
		msg, _ := strconv.Atoi(api.Call(t, "sendMessage", i+1)["sent_message_id"])
		waitUntil(t, "the question noted", func() bool {
			_, ok, _ := b.ch.Get(t.Context(), channel.TelegramNoteKey(tgA, 42, msg))
			return ok
		})
		msgs = append(msgs, msg)
	}
	waitUntil(t, "a polls", func() bool { return api.Polls() > 0 })
	// The first reply is handled; the second's note read waits on NATS,
	// and meanwhile a's lead is lost; the third waits behind it.
	gate.arm(channel.TelegramNoteKey(tgA, 42, msgs[1]))
	var replies []map[string]any
	for i, msg := range msgs {
		replies = append(replies, telegramtest.Reply(42, 500+i, msg, "answer "+strconv.Itoa(i)))
	}
	api.Push(replies...)
	recv(t, "a's read of a reply's note", gate.entered)
	close(la.lost)
	close(gate.open)
	close(lb.lead)

	for i, id := range ids {
		want := "answer " + strconv.Itoa(i)
		if rep := recv(t, id+"'s answer", answers[i]); rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != want {
			t.Errorf("%s: the agent got %+v, want %q", id, rep, want)
		}
	}
	for _, said := range api.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
