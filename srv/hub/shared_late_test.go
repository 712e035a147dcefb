package hub

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// countingBus is a bus that counts its reads; while stuck, a read waits
// until its context ends, as one of a NATS that does not answer.
type countingBus struct {
	*bus
	gets  atomic.Int64
	stuck atomic.Bool
}

func (b *countingBus) Get(ctx context.Context, room, id string) (SharedRecord, uint64, error) {
	b.gets.Add(1)
	if b.stuck.Load() {
		<-ctx.Done()
		return SharedRecord{}, 0, ctx.Err()
	}
	return b.bus.Get(ctx, room, id)
}

// TestLateAnswerReadsBounded: answers to requests an instance does not
// show each look in the shared store for one asked elsewhere and not
// heard yet. A door that asks first (Allows) and then answers reads it
// once, not twice; a client answering random IDs makes the room's reads
// no more than its budget allows, however many it sends; and a read
// ends with its caller, or after catchUp, not the 10 s of a write.
func TestLateAnswerReadsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBus{bus: newBus()}
		h := New(Options{Shared: b, Instance: "b"})
		defer h.Close()

		if err := h.Allows(context.Background(), "tok", wire.AskQuestion, "none", Reply{}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("Allows of no request: %v", err)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "none", textReply("Blue.")); !errors.Is(err, ErrNotPending) {
			t.Fatalf("an answer to no request: %v", err)
		}
		if n := b.gets.Load(); n != 1 {
			t.Fatalf("Allows, then Answer, read the store %d times, want once", n)
		}

		time.Sleep(time.Minute) // the budget is full again
		b.gets.Store(0)
		const tries = 1000
		for i := range tries {
			_ = h.Answer(context.Background(), "tok", wire.AskQuestion, "random-"+strconv.Itoa(i), textReply("x"))
		}
		if n := b.gets.Load(); n > lateBurst {
			t.Fatalf("%d answers to random IDs at once read the store %d times, want at most %d", tries, n, lateBurst)
		}
		time.Sleep(time.Second)
		b.gets.Store(0)
		for i := range tries {
			_ = h.Answer(context.Background(), "tok", wire.AskQuestion, "later-"+strconv.Itoa(i), textReply("x"))
		}
		if n := b.gets.Load(); n < 1 || n > lateRate {
			t.Fatalf("a second later, %d answers read the store %d times, want 1 to %d", tries, n, lateRate)
		}
		// Another token's room has its own budget.
		b.gets.Store(0)
		_ = h.Answer(context.Background(), "other", wire.AskQuestion, "x", textReply("x"))
		if n := b.gets.Load(); n != 1 {
			t.Fatalf("another room's answer read the store %d times, want once", n)
		}

		time.Sleep(time.Minute)
		b.stuck.Store(true)
		start := time.Now()
		_ = h.Answer(context.Background(), "tok", wire.AskQuestion, "stuck-1", textReply("x"))
		if took := time.Since(start); took > catchUp {
			t.Fatalf("an answer's read of a store that does not answer took %v, want at most %v", took, catchUp)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Answer(ctx, "tok", wire.AskQuestion, "stuck-2", textReply("x")) }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotPending) {
				t.Fatalf("an answer whose caller left: %v", err)
			}
		default:
			t.Fatal("an answer's read goes on after its caller left")
		}
	})
}
