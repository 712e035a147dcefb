package cluster

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestCloseTakenOverFromADeadPusher: a question asked on A is answered
// on B while A pushes it, and A never finishes that push (killed: its
// push service never answers it). The close left owed to A is taken
// over by B: the device gets it, once.
func TestCloseTakenOverFromADeadPusher(t *testing.T) {
	takeOverRound(t, false)
}

// TestCloseTakenOverFromASlowPusher: as above, but A was only slow
// (stopped, then continued): its push goes through after B took its
// close over, and A, seeing that, pushes no second close.
func TestCloseTakenOverFromASlowPusher(t *testing.T) {
	takeOverRound(t, true)
}

func takeOverRound(t *testing.T, slow bool) {
	var (
		b      *instance
		closed = make(chan struct{}) // the device got a close of q-1
		once   sync.Once
	)
	p := newPushPair(t, func(r *http.Request, m pushOpened) {
		switch {
		case m.Type == "ask" && m.ID == "q-1":
			// A pushes it: answered on B meanwhile, and A's push hangs
			// (dead), or returns once B's close is in (slow).
			if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q-1", reply("pc", "yes")); err != nil {
				t.Error(err)
			}
			if !slow {
				<-r.Context().Done()
				return
			}
			select {
			case <-closed:
			case <-r.Context().Done():
			}
		case m.Type == "settled" && m.ID == "q-1":
			once.Do(func() { close(closed) })
		}
	})
	a, oa, ob := p.a, p.oa, p.ob
	b = p.b
	oa.TakeOver, ob.TakeOver = 50*time.Millisecond, 50*time.Millisecond
	pusher(t, a, oa)
	pusher(t, b, ob)
	p.subscribe()

	wait(t, ask(context.Background(), a, question("q-1", "Deploy?")))
	p.seen("q-1", func(_, closes int) bool { return closes > 0 })
	// Asked once every close of q-1 is queued on the instances that
	// live: once they are pushed, every close of q-1 is in. On A, q-2
	// may be queued before A's push of q-1 is through: q-4 is not.
	want := 1
	if slow {
		ask(context.Background(), a, question("q-2", "Ship?"))
		p.seen("q-1", func(asks, _ int) bool { return asks == 1 })
		ask(context.Background(), a, question("q-4", "Tag?"))
		want = 3
	}
	ask(context.Background(), b, question("q-3", "Merge?"))
	var closes int
	all := p.seen("q-1", func(asks, n int) bool { closes = n; return asks == want })
	if closes != 1 || all[0] != (pushOpened{"ask", "q-1"}) || all[1] != (pushOpened{"settled", "q-1"}) {
		t.Fatalf("the device got %v: %d closes of q-1, want one, after its ask", all, closes)
	}
}
