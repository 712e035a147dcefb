package channel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// listening is a channel whose Listen says when it started.
type listening struct{ started chan struct{} }

func (*listening) Name() string                       { return "listening" }
func (*listening) Send(context.Context, Notice) error { return nil }
func (l *listening) Listen(ctx context.Context, _ Answers) {
	close(l.started)
	<-ctx.Done()
}

// TestAnswersWaitForRestore: a server that restores its requests after
// New takes no answer before (a Telegram update handled then was told
// its own question was not pending, the hub not knowing it yet).
func TestAnswersWaitForRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(hub.Options{})
		defer h.Close()
		l := &listening{started: make(chan struct{})}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {l}}, AfterRestore: true})
		defer m.Close()
		synctest.Wait()
		select {
		case <-l.started:
			t.Fatal("the channel listened before the requests were restored")
		default:
		}
		m.Restored()
		synctest.Wait()
		select {
		case <-l.started:
		default:
			t.Fatal("the channel did not listen once the requests were restored")
		}
	})
}

// recorder records the questions it is sent; those in refuse fail.
type recorder struct {
	mu     sync.Mutex
	asked  []string
	refuse map[string]bool
	sent   chan string
}

func (*recorder) Name() string { return "recorder" }
func (r *recorder) Send(_ context.Context, n Notice) error {
	if n.Kind != hub.Asked {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse[n.Request.ID] {
		return errors.New("refused")
	}
	r.asked = append(r.asked, n.Request.ID)
	r.sent <- n.Request.ID
	return nil
}

// TestRestoredSendsWhatWasNotSent: of two pending questions, the one its
// channel had is not sent again once the requests are restored; the one
// it never had is.
func TestRestoredSendsWhatWasNotSent(t *testing.T) {
	notes, err := OpenFileNotes(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer notes.Close()
	h := hub.New(hub.Options{})
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(id string) {
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy " + id + "?", Timeout: time.Hour})
		}()
	}
	before := &recorder{refuse: map[string]bool{"q-2": true}, sent: make(chan string, 10)}
	m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {before}}, Notes: notes, Tries: 1, AfterRestore: true})
	m.Restored()
	ask("q-1")
	if id := <-before.sent; id != "q-1" {
		t.Fatalf("sent %s", id)
	}
	ask("q-2")
	for {
		if ps, _ := h.PendingMessages(tokA); len(ps) == 2 {
			break
		}
		time.Sleep(time.Millisecond) // the hub's pending list: no event says q-2 was refused by the channel
	}
	m.Close() // the server stops; q-2 never reached the channel

	after := &recorder{sent: make(chan string, 10)}
	m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {after}}, Notes: notes, AfterRestore: true})
	defer m.Close()
	m.Restored()
	if id := <-after.sent; id != "q-2" {
		t.Fatalf("sent again %s, want q-2", id)
	}
	m.Close()
	if !slices.Equal(after.asked, []string{"q-2"}) {
		t.Errorf("sent again %v, want [q-2]", after.asked)
	}
}
