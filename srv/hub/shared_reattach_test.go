package hub

import (
	"context"
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
		var nodes []*node
		for _, name := range []string{"a", "b", "c"} {
			h := New(Options{Shared: b, Instance: name, OrphanNotice: time.Minute, OrphanGrace: time.Hour})
			defer h.Close()
			nodes = append(nodes, &node{h: h})
		}
		a, bn, c := nodes[0], nodes[1], nodes[2]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _ = a.h.Ask(ctx, "tok", req) }()
		synctest.Wait()
		b.deliver(a, bn, c)

		if err := bn.h.Answer("tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
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
		b.deliver(a) // A hears the answer, with no caller for it
		synctest.Wait()
		b.deliver(c) // C hears whatever A wrote, before B does
		if got := c.h.TakeMissed("tok", "/p", nil, 0); len(got) != 0 {
			t.Fatalf("the project's next call through C was handed the answer its agent had: %+v", got)
		}
		b.deliver(a, bn, c)
		synctest.Wait()
		b.deliver(a, bn, c)
		for i, n := range nodes {
			if got := n.h.TakeMissed("tok", "/p", nil, 0); len(got) != 0 {
				t.Fatalf("instance %d gave it again: %+v", i, got)
			}
		}
	})
}
