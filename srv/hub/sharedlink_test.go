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

// inflightBus is a bus on which another write of a record is in flight,
// not yet committed, while inflight: a create of its key is refused as
// existing, and no read finds it (a replicated JetStream stream without
// its quorum).
type inflightBus struct {
	*bus
	inflight atomic.Bool
}

func (b *inflightBus) Create(ctx context.Context, rec SharedRecord) (uint64, error) {
	if b.inflight.Load() {
		return 0, ErrRecordExists
	}
	return b.bus.Create(ctx, rec)
}

func (b *inflightBus) Get(ctx context.Context, room, id string) (SharedRecord, uint64, error) {
	if b.inflight.Load() {
		return SharedRecord{}, 0, ErrRecordMissing
	}
	return b.bus.Get(ctx, room, id)
}

// TestAskWhileItsRecordIsInFlight: the agent's first try timed out on an
// instance whose create is still in flight, and it asks again, with the
// same ID, through another: the store says the record exists, and no
// read finds it. The call is told to try again (that write may land, or
// be dropped), not that the request cannot be saved: refused so, the
// agent would give up on a question that may yet be shown and answered.
// Tried again once the write was dropped, it is asked.
func TestAskWhileItsRecordIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &inflightBus{bus: newBus()}
		h := New(Options{Shared: b, Instance: "a"})
		defer h.Close()
		n := &node{h: h}
		req := Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Minute}
		b.inflight.Store(true)
		if _, err := h.Ask(context.Background(), "tok", req); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("asked while its record is in flight: %v, want ErrUnreachable", err)
		}
		b.inflight.Store(false) // that write was dropped
		done := make(chan *Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), "tok", req)
			done <- rep
		}()
		synctest.Wait()
		b.deliver(n)
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Yes.")); err != nil {
			t.Fatal(err)
		}
		b.deliver(n)
		if rep := <-done; rep == nil {
			t.Fatal("asked again: no answer")
		}
	})
}
