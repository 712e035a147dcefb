package hub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// downBus is a bus whose writes fail as unreachable while down.
type downBus struct {
	*bus
	down atomic.Bool
}

func (d *downBus) Update(ctx context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	if d.down.Load() {
		return 0, ErrUnreachable
	}
	return d.bus.Update(ctx, rec, rev)
}

// TestDeadlineFiresOnceEventually: a request's deadline passes while the
// store cannot save anything (a NATS cluster without quorum); the
// timeout is tried again, with backoff, for as long as it takes, and
// lands once the store is back: the agent hears it timed out, the record
// says so, once.
func TestDeadlineFiresOnceEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBus{bus: newBus()}
		h := New(Options{Shared: b, Instance: "a"})
		defer h.Close()
		n := &node{h: h}
		done := make(chan error, 1)
		go func() {
			_, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Minute})
			done <- err
		}()
		synctest.Wait()
		b.deliver(n)
		b.down.Store(true)
		time.Sleep(time.Hour) // the deadline passes; NATS stays away an hour
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the call ended while nothing could be saved: %v", err)
		default:
		}
		b.down.Store(false)
		time.Sleep(retryMax)
		synctest.Wait()
		b.deliver(n)
		if err := <-done; !errors.Is(err, ErrTimeout) {
			t.Fatalf("the call ended with %v, want a timeout", err)
		}
		timeouts := 0
		for _, rec := range b.log {
			if rec.Status == store.TimedOut {
				timeouts++
			}
		}
		if timeouts != 1 {
			t.Errorf("%d timeouts written, want 1", timeouts)
		}
	})
}
