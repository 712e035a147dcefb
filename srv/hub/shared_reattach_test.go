package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestSharedReattachBeforeHolderHeard: the agent asks through A, which
// then stalls (paused, say) before it hears the answer a device gives
// on B, written as delivered since A's call was there. The agent gives
// up on A and re-attaches by ID through B, which hands it the answer.
// When A goes on it finds no caller for the answer and marks it kept
// for the project's next call; that next call, through C, must not be
// handed it again, whichever instance has heard what: the agent has it.
func TestSharedReattachBeforeHolderHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
		a, bn, c := nodes[0], nodes[1], nodes[2]
		b.deliver(a, bn, c)

		if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
			t.Fatal(err)
		}
		if n := b.last().ClosedNote; n != "" {
			t.Fatalf("the answer's note is %q, want it written as delivered", n)
		}
		b.deliver(bn, c) // A, stalled, hears nothing
		rep, err := bn.h.Ask(context.Background(), "tok", req)
		if err != nil || rep == nil {
			t.Fatalf("re-attach on B: %v %v", rep, err)
		}

		cancel() // A notices its call went
		synctest.Wait()
		b.notGivenAgain(t, nodes)
	})
}

// TestSharedReattachClaimNotSaved: the agent's call leaves A, its holder
// (A lost NATS), and re-attaches through B, whose claim of the request
// cannot be saved just then, so the record still names A. The answer,
// given once the store is back, is written as delivered (A holds the
// call, as far as the record says), and B's caller has it. A, hearing an
// answer with no caller of its own, marks it kept for the project's
// next call: that call must not be handed it again.
func TestSharedReattachClaimNotSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBus{bus: newBus()}
		nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
		a, bn, c := nodes[0], nodes[1], nodes[2]
		b.deliver(a, bn, c)
		cancel() // the call leaves A
		synctest.Wait()

		b.down.Store(true) // B's claim is not saved
		got := make(chan *Reply, 1)
		go func() {
			rep, err := bn.h.Ask(context.Background(), "tok", req)
			if err != nil {
				t.Errorf("re-attach on B: %v", err)
			}
			got <- rep
		}()
		synctest.Wait()
		b.down.Store(false)
		if h := b.last().Holder; h != "a" {
			t.Fatalf("the record's holder is %q, want a (B's claim not saved)", h)
		}

		if err := c.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
			t.Fatal(err)
		}
		b.deliver(bn) // B's caller has it
		synctest.Wait()
		if rep := <-got; rep == nil {
			t.Fatal("B's caller had no answer")
		}
		b.notGivenAgain(t, nodes)
	})
}

// TestSharedReattachBeforeHeardAtAll: the agent's call leaves A, its
// holder, and the person answers. The agent re-attaches by ID through B,
// which has heard nothing of the request yet (its watch stalled, as
// right after a NATS cluster gets its quorum back): B finds the answer
// only in the record. The answer is either kept for the project's next
// call (A wrote it, with no caller), or written as delivered by C while
// A still held the call, which A, with no caller, then keeps. Either
// way the agent has it from B, and the project's next call, wherever it
// comes in, must not be handed it again.
func TestSharedReattachBeforeHeardAtAll(t *testing.T) {
	for _, keptBy := range []string{"holder", "answering instance"} {
		t.Run(keptBy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBus()
				nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
				a, bn, c := nodes[0], nodes[1], nodes[2]
				b.deliver(a, c) // B, stalled, hears nothing
				cancel()        // the call leaves A
				synctest.Wait()

				answerer, want := a, ReasonUndelivered
				if keptBy == "answering instance" {
					answerer, want = c, "" // C does not know A's call left
				}
				if err := answerer.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
					t.Fatal(err)
				}
				if n := b.last().ClosedNote; n != want {
					t.Fatalf("the answer's note is %q, want %q", n, want)
				}
				rep, err := bn.h.Ask(context.Background(), "tok", req)
				if err != nil || rep == nil {
					t.Fatalf("re-attach on B: %v %v", rep, err)
				}

				b.notGivenAgain(t, nodes)
			})
		})
	}
}

// TestSharedReattachWhileStoreAway: an answer kept for the project's
// next call, and its agent re-attaching by ID while NATS is away, so its
// hand-over cannot be written. The agent is told to try again rather
// than given the answer with the record still saying kept: once NATS is
// back, the project's next call would be handed it too. It gets it when
// it tries again, once.
func TestSharedReattachWhileStoreAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBus{bus: newBus()}
		nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
		a, bn, c := nodes[0], nodes[1], nodes[2]
		b.deliver(a, bn, c)
		cancel() // the call leaves A
		synctest.Wait()
		if err := a.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
			t.Fatal(err)
		}
		b.deliver(a, bn, c)
		if n := b.last().ClosedNote; n != ReasonUndelivered {
			t.Fatalf("the answer's note is %q, want it kept", n)
		}

		b.down.Store(true)
		rep, err := bn.h.Ask(context.Background(), "tok", req)
		if rep != nil || !errors.Is(err, ErrUnreachable) {
			t.Fatalf("re-attach on B while NATS is away: %v %v, want ErrUnreachable", rep, err)
		}
		b.down.Store(false)
		rep, err = bn.h.Ask(context.Background(), "tok", req)
		if err != nil || rep == nil {
			t.Fatalf("re-attach on B once NATS is back: %v %v", rep, err)
		}
		b.deliver(a, bn, c)
		noneGivesIt(t, nodes)
	})
}
