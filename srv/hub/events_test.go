package hub

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestEvents: a subscriber hears each request asked, then exactly one
// outcome: the first answer (with who answered and through which door),
// a timeout at its deadline, or the agent's cancel; after unsubscribing
// it hears nothing.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		var (
			mu  sync.Mutex
			all []Event
		)
		unsubscribe := h.Subscribe(func(ev Event) { mu.Lock(); all = append(all, ev); mu.Unlock() })
		heard := func() []Event {
			synctest.Wait() // every goroutine that emits is done
			mu.Lock()
			defer mu.Unlock()
			return append([]Event(nil), all...)
		}
		ask := func(id string, timeout time.Duration) chan error {
			done := make(chan error, 1)
			go func() {
				_, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: id, Text: "q " + id, Timeout: timeout, Door: "mcp"})
				done <- err
			}()
			synctest.Wait()
			return done
		}

		answered := ask("a", time.Hour)
		time.Sleep(3 * time.Second) // fake time: the person takes 3 s
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "a", Reply{ClientID: "phone", Door: "ws"}); err != nil {
			t.Fatal(err)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "a", Reply{ClientID: "pc", Door: "ws"}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("second answer: %v", err)
		}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		timedOut := ask("b", time.Minute)
		time.Sleep(time.Minute)
		if err := <-timedOut; !errors.Is(err, ErrTimeout) {
			t.Fatalf("b: %v", err)
		}
		cancelled := ask("c", time.Hour)
		if err := h.Cancel(context.Background(), "tok", "c"); err != nil {
			t.Fatal(err)
		}
		if err := <-cancelled; !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("c: %v", err)
		}

		got := heard()
		want := []struct {
			kind EventKind
			id   string
		}{{Asked, "a"}, {Answered, "a"}, {Asked, "b"}, {TimedOut, "b"}, {Asked, "c"}, {Withdrawn, "c"}}
		if len(got) != len(want) {
			t.Fatalf("got %d events, want %d: %+v", len(got), len(want), got)
		}
		for i, w := range want {
			ev := got[i]
			if ev.Kind != w.kind || ev.Request.ID != w.id || ev.Token != "tok" || ev.Request.Door != "mcp" {
				t.Errorf("event %d: %v %q (token %q, door %q), want %v %q", i, ev.Kind, ev.Request.ID, ev.Token, ev.Request.Door, w.kind, w.id)
			}
		}
		if r := got[1].Reply; r == nil || r.ClientID != "phone" || r.Door != "ws" {
			t.Errorf("answer event's reply: %+v", r)
		}
		if d := got[1].At.Sub(got[1].AskedAt); d != 3*time.Second {
			t.Errorf("answered after %v, want 3s", d)
		}
		if got[3].Reason != "timeout" || got[5].Reason != "cancelled" {
			t.Errorf("reasons: %q, %q", got[3].Reason, got[5].Reason)
		}

		unsubscribe()
		n := len(got)
		late := ask("d", time.Hour)
		_ = h.Cancel(context.Background(), "tok", "d")
		<-late
		if got := heard(); len(got) != n {
			t.Errorf("heard %d events after unsubscribing", len(got)-n)
		}
	})
}
