package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestSharedReattachAfterTakenElsewhere: an answer given on B while the
// agent that asked through A is away is kept for the project's next call,
// which takes it through C. A re-attach by ID on B, which has not yet
// heard that the answer was kept, or taken, is told it went to another
// call: two agents would act on one answer. B may not have heard its own
// write yet (A had said no agent waits), or have heard only the answer,
// written as delivered before A could say so, and not A's mark that no
// agent had it.
func TestSharedReattachAfterTakenElsewhere(t *testing.T) {
	for _, gone := range []bool{true, false} {
		name := "answered after the agent-gone mark"
		if !gone {
			name = "answered before the agent-gone mark"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBus()
				nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Second, OrphanGrace: time.Hour})
				a, bn, c := nodes[0], nodes[1], nodes[2]
				b.deliver(a, bn, c)
				cancel() // the agent's call goes
				synctest.Wait()
				if gone {
					time.Sleep(2 * time.Second) // past the notice: A marks it gone
					synctest.Wait()
					b.deliver(a, bn, c)
				}

				if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
					t.Fatal(err)
				}
				if !gone {
					b.deliver(a, bn) // A has no caller for it: it marks it kept
					synctest.Wait()
				}
				if n := b.last().ClosedNote; n != ReasonUndelivered {
					t.Fatalf("the answer's note is %q", n)
				}
				b.deliver(c) // B has not heard that mark
				if got := c.h.TakeMissed("tok", "/p", nil, 0); len(got) != 1 {
					t.Fatalf("C's TakeMissed = %+v", got)
				}
				rep, err := bn.h.Ask(context.Background(), "tok", req)
				if !errors.Is(err, ErrHandedOver) {
					t.Fatalf("re-attach on B after C took the answer: %v %v, want ErrHandedOver", rep, err)
				}
				b.deliver(a, bn, c)
				noneGivesIt(t, nodes)
			})
		})
	}
}
