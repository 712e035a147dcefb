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

// landsUnsaid is a bus whose next update lands but is reported as not
// answered in time, as a write to NATS is when its writer was paused
// (SIGSTOP, a laptop's sleep) past its deadline.
type landsUnsaid struct {
	*bus
	once atomic.Bool
}

func (l *landsUnsaid) Update(ctx context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	got, err := l.bus.Update(ctx, rec, rev)
	if err == nil && l.once.CompareAndSwap(true, false) {
		return 0, context.DeadlineExceeded
	}
	return got, err
}

// TestUnconfirmedOutcomeToldOnce: an answer whose save went unconfirmed
// but landed is the answer: the agent has it, and the instance that wrote
// it tells its subscribers (a chat's message edited, a notification
// withdrawn) when it hears it, once; no other instance does.
func TestUnconfirmedOutcomeToldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &landsUnsaid{bus: newBus()}
		nodes := instances(t, b, Options{})
		told := make([]atomic.Int32, len(nodes))
		for i, n := range nodes {
			n.h.Subscribe(func(ev Event) {
				if ev.Kind == Answered {
					told[i].Add(1)
				}
			})
		}
		a, bn := nodes[0], nodes[1]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		got := make(chan *Reply, 1)
		go func() { rep, _ := a.h.Ask(context.Background(), "tok", req); got <- rep }()
		synctest.Wait()
		b.deliver(nodes...)
		synctest.Wait()

		b.once.Store(true)
		if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); !errors.Is(err, ErrNotSaved) {
			t.Fatalf("an answer whose save went unconfirmed: %v", err)
		}
		b.deliver(nodes...)
		synctest.Wait()
		if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != "Blue." {
			t.Fatalf("the agent got %+v", rep)
		}
		for i := range nodes {
			want := int32(0)
			if nodes[i] == bn {
				want = 1
			}
			if n := told[i].Load(); n != want {
				t.Errorf("instance %d told its subscribers %d times, want %d", i, n, want)
			}
		}
	})
}
