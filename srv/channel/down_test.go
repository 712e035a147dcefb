package channel

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// switchable is a channel whose service is down until told otherwise; it
// counts the sends tried.
type switchable struct {
	mu    sync.Mutex
	down  bool
	tried int
}

func (s *switchable) Name() string { return "switchable" }

func (s *switchable) Send(context.Context, Notice) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tried++
	if s.down {
		return errors.New("connection refused")
	}
	return nil
}

func (s *switchable) set(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *switchable) sends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tried
}

// TestChannelDown: a channel whose service is down for good (an ntfy or
// webhook URL on a closed port) costs each notice every try and its
// backoff, so notices came faster than they failed: the queue stayed
// full, a notice went out (or was dropped) long after its question, and
// the log had a warning for every notice. Once a notice has failed every
// try, the channel counts as down: each next notice is tried once, and
// the log says so once, and once more when the channel delivers again,
// with the count it could not deliver meanwhile. A failure after that is
// tried again in full.
func TestChannelDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		h := hub.New(hub.Options{})
		defer h.Close()
		ch := &switchable{down: true}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {ch}}, Logger: log})
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var asks sync.WaitGroup
		ask := func(id string) {
			asks.Go(func() {
				_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy?", Timeout: time.Hour})
			})
		}
		const n = 10
		for i := range n {
			ask("q-" + strconv.Itoa(i))
		}
		time.Sleep(10 * time.Minute) // every backoff over
		synctest.Wait()
		if got, want := ch.sends(), 5+(n-1); got != want {
			t.Errorf("%d notices to a channel that is down: %d sends, want %d (the first tried 5 times, then once each)", n, got, want)
		}
		if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
			t.Errorf("%d warnings for one channel going down, want 1:\n%s", got, logs.String())
		}

		ch.set(false)
		before := ch.sends()
		ask("q-up")
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := ch.sends() - before; got != 1 {
			t.Errorf("the channel back up: %d sends of one notice, want 1", got)
		}
		if !strings.Contains(logs.String(), "level=INFO") || !strings.Contains(logs.String(), "undelivered="+strconv.Itoa(n)) {
			t.Errorf("no line saying the channel delivers again and what it could not deliver:\n%s", logs.String())
		}

		ch.set(true)
		before = ch.sends()
		ask("q-down-again")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := ch.sends() - before; got != 5 {
			t.Errorf("a failure after the channel came back: %d sends, want 5 (tried again in full)", got)
		}
		cancel()
		asks.Wait()
	})
}

// hanging is a channel whose service never answers: each send lasts
// until its timeout.
type hanging struct{}

func (hanging) Name() string { return "hanging" }

func (hanging) Send(ctx context.Context, _ Notice) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestChannelFullQueueToldOnce: notices past a full queue drop its
// oldest; the log told each one, a line for every question asked while a
// service hangs. It now tells one a minute, with how many went since.
func TestChannelFullQueueToldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		// More questions waiting than the channel's queue holds.
		h := hub.New(hub.Options{MaxPending: queueLen + 100})
		defer h.Close()
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {hanging{}}}, Logger: log})
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var asks sync.WaitGroup
		for i := range queueLen + 50 {
			asks.Go(func() {
				_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-" + strconv.Itoa(i), Text: "Deploy?", Timeout: time.Hour})
			})
		}
		synctest.Wait()
		if got := strings.Count(logs.String(), "queue is full"); got != 1 {
			t.Errorf("%d lines for the notices dropped within a minute, want 1", got)
		}
		cancel()
		asks.Wait()
	})
}
