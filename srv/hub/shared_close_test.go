package hub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// gatedBus is a bus whose Update waits for gate while hold is set, and
// fails once closed is set, as a closed NATS connection does.
type gatedBus struct {
	*bus
	gate   chan struct{}
	hold   atomic.Bool
	closed atomic.Bool
	late   atomic.Int32 // Updates tried once closed
}

func (g *gatedBus) Update(ctx context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	if g.hold.Load() {
		<-g.gate
	}
	if g.closed.Load() {
		g.late.Add(1)
		return 0, errors.New("nats: connection closed")
	}
	return g.bus.Update(ctx, rec, rev)
}

// TestSharedCloseWaitsForWrites: the holder hears an answer no agent had
// and marks it undelivered on a goroutine of its own; the server shuts
// down meanwhile. Hub.Close waits for that write before it returns (and
// the cluster closes NATS), so the mark lands and the project's next
// call, on another instance, gets the answer.
func TestSharedCloseWaitsForWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A's connection to the shared records is g; B's is its own.
		g := &gatedBus{bus: newBus(), gate: make(chan struct{})}
		defer close(g.gate)
		var nodes []*node
		for _, sh := range []Shared{g, g.bus} {
			h := New(Options{Shared: sh, Instance: string(rune('a' + len(nodes))), OrphanNotice: time.Hour, OrphanGrace: time.Hour})
			defer h.Close()
			nodes = append(nodes, &node{h: h})
		}
		a, bn := nodes[0], nodes[1]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _ = a.h.Ask(ctx, "tok", req) }()
		synctest.Wait()
		g.deliver(a, bn)
		cancel() // the agent's call goes
		synctest.Wait()
		if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
			t.Fatal(err)
		}
		g.deliver(bn)

		g.hold.Store(true)
		g.deliver(a) // A, the holder, had no caller: it marks the answer undelivered
		synctest.Wait()
		g.closeDuringWrite(t, a.h)
		if n := g.last().ClosedNote; n != ReasonUndelivered {
			t.Fatalf("after the shutdown the answer's note is %q, want %q", n, ReasonUndelivered)
		}
		g.deliver(bn)
		if got := bn.h.TakeMissed("tok", "/p", nil, 0); len(got) != 1 || got[0].ID != "q" {
			t.Fatalf("B's TakeMissed = %+v", got)
		}
		if n := g.late.Load(); n != 0 {
			t.Fatalf("%d writes tried after NATS closed", n)
		}
	})
}

// TestSharedCloseWaitsForOutcomes: a person's answer, and the agent-gone
// mark of a timer, are being written when the server shuts down: Hub.Close
// waits for them, so they land before the cluster closes NATS.
func TestSharedCloseWaitsForOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start begins the write; its result, when it has one, comes on
		// the channel.
		start func(h *Hub, leave context.CancelFunc) <-chan error
		check func(t *testing.T, rec SharedRecord)
	}{
		{"answer", func(h *Hub, _ context.CancelFunc) <-chan error {
			res := make(chan error, 1)
			go func() { res <- h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")) }()
			return res
		}, func(t *testing.T, rec SharedRecord) {
			if rec.Reply == nil {
				t.Errorf("the answer was not written: %+v", rec)
			}
		}},
		{"agent-gone mark", func(h *Hub, leave context.CancelFunc) <-chan error {
			leave()
			time.Sleep(time.Minute) // past OrphanNotice, on the bubble's clock
			return nil
		}, func(t *testing.T, rec SharedRecord) {
			if !rec.Gone {
				t.Errorf("the agent-gone mark was not written: %+v", rec)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gatedBus{bus: newBus(), gate: make(chan struct{})}
				defer close(g.gate)
				h := New(Options{Shared: g, Instance: "a", OrphanNotice: time.Second, OrphanGrace: time.Hour})
				defer h.Close()
				a := &node{h: h}
				req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() { _, _ = h.Ask(ctx, "tok", req) }()
				synctest.Wait()
				g.deliver(a)

				g.hold.Store(true)
				res := tc.start(h, cancel)
				synctest.Wait()
				g.closeDuringWrite(t, h)
				if res != nil {
					if err := <-res; err != nil {
						t.Fatalf("the write during the shutdown: %v", err)
					}
				}
				tc.check(t, g.last())
				if n := g.late.Load(); n != 0 {
					t.Fatalf("%d writes tried after NATS closed", n)
				}
			})
		})
	}
}

// closeDuringWrite closes h while a write of the hub is held at the gate,
// then the cluster (the bus refuses writes from then on), and checks that
// Close waited for the write; the write is let through once Close is
// seen waiting. Called inside a synctest bubble.
func (g *gatedBus) closeDuringWrite(t *testing.T, h *Hub) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		h.Close()
		g.closed.Store(true) // then the cluster closes NATS
		close(closed)
	}()
	synctest.Wait()
	select {
	case <-closed:
		t.Fatal("Hub.Close returned while a write of the hub was in flight")
	default:
	}
	g.hold.Store(false)
	g.gate <- struct{}{}
	<-closed
}
