package hub

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// racedBus is a bus whose next Update of a record first lets before
// write it (another change landing between the read and the write of a
// compare-and-set, which then fails and is read again).
type racedBus struct {
	*bus
	mu     sync.Mutex
	before func()
}

func (r *racedBus) Update(ctx context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	r.mu.Lock()
	before := r.before
	r.before = nil
	r.mu.Unlock()
	if before != nil {
		before()
	}
	return r.bus.Update(ctx, rec, rev)
}

// TestSharedClaimTakenMeanwhileNotToldAgain: the agent re-attaches
// through B to a request A asked; B's claim reads A as its holder, but
// before its write B is made the holder by another of its claims (the
// agent's call came twice), which told it again. This claim, read again,
// changes nothing: it does not tell the question again (a second push of
// it, a second set of capabilities). Unraced, the claim tells it again
// once.
func TestSharedClaimTakenMeanwhileNotToldAgain(t *testing.T) {
	for _, raced := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			rb := &racedBus{bus: newBus()}
			nodes := instances(t, rb, Options{OrphanNotice: time.Hour, OrphanGrace: time.Hour})
			a, bn := nodes[0], nodes[1]
			var again atomic.Int32
			bn.h.Subscribe(func(ev Event) {
				if ev.Kind == Asked && ev.Again {
					again.Add(1)
				}
			})
			req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _, _ = a.h.Ask(ctx, "tok", req) }()
			synctest.Wait()
			rb.deliver(a, bn)

			rb.mu.Lock()
			rb.before = nil
			if raced {
				rb.before = func() {
					rb.bus.mu.Lock()
					defer rb.bus.mu.Unlock()
					rec := rb.recs["q"]
					rec.Holder, rec.Gone = "b", false
					rb.putLocked(rec)
				}
			}
			rb.mu.Unlock()
			go func() { _, _ = bn.h.Ask(ctx, "tok", req) }() // re-attaches: B claims
			synctest.Wait()
			if got, _, _ := rb.Get(ctx, "", "q"); got.Holder != "b" {
				t.Fatalf("holder %q, want b", got.Holder)
			}
			want := int32(1)
			if raced {
				want = 0
			}
			if n := again.Load(); n != want {
				t.Fatalf("raced %v: B told the question again %d times, want %d", raced, n, want)
			}
		})
	}
}
