package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The request lifecycle is written once, over the records; these tests
// run it over both stores: the embedded one of a server that runs alone,
// and JetStream KV (a real nats-server) of a cluster.
var lifecycleStores = []struct {
	name string
	open func(t *testing.T, o hub.Options) *hub.Hub
}{
	{"embedded store", func(t *testing.T, o hub.Options) *hub.Hub {
		db, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.Store = db
		h := hub.New(o)
		t.Cleanup(func() { h.Close(); _ = db.Close() })
		return h
	}},
	{"JetStream KV", func(t *testing.T, o hub.Options) *hub.Hub {
		return startWith(t, natstest.Start(t).URL(), "a", o).hub
	}},
}

// lifecycle runs test over each store, with a device joined to the room.
func lifecycle(t *testing.T, o hub.Options, test func(t *testing.T, in *instance, dev *client)) {
	for _, s := range lifecycleStores {
		t.Run(s.name, func(t *testing.T) {
			in := &instance{hub: s.open(t, o)}
			dev := newClient("dev")
			in.hub.Join(tok, dev, nil, hub.Resume{})
			test(t, in, dev)
		})
	}
}

// Two answers at once: exactly one wins; the caller gets it, the device
// that lost is told of the winner.
func TestLifecycleFirstReplyWins(t *testing.T) {
	lifecycle(t, hub.Options{}, func(t *testing.T, in *instance, dev *client) {
		done := ask(context.Background(), in, question("q", "Which?"))
		dev.expect(t, wire.CmdAskQuestion)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, who := range []string{"x", "y"} {
			wg.Go(func() { errs[i] = in.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply(who, who)) })
		}
		wg.Wait()
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner == "":
				winner = []string{"x", "y"}[i]
			case !errors.Is(err, hub.ErrNotPending):
				t.Fatalf("answers: %v", errs)
			}
		}
		if r := wait(t, done); r.err != nil || text(r.rep) != winner {
			t.Fatalf("Ask = %+v, %v; want %s's answer", r.rep, r.err, winner)
		}
		if n := dev.expect(t, wire.CmdAskQuestionReplyNotification); n.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != winner {
			t.Fatalf("the device was told %v", n)
		}
	})
}

// The agent withdraws its request: the caller hears so, the device too.
func TestLifecycleWithdraw(t *testing.T) {
	lifecycle(t, hub.Options{}, func(t *testing.T, in *instance, dev *client) {
		done := ask(context.Background(), in, question("q", "Which?"))
		dev.expect(t, wire.CmdAskQuestion)
		if err := in.hub.Cancel(context.Background(), tok, "q"); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, done); !errors.Is(r.err, hub.ErrWithdrawn) {
			t.Fatalf("Ask = %+v, %v", r.rep, r.err)
		}
		if n := dev.expect(t, wire.CmdRequestCancelled); n.GetRequestCancelledNotification().GetReason() != "cancelled" {
			t.Fatalf("the device was told %v", n)
		}
		if err := in.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("dev", "late")); !errors.Is(err, hub.ErrNotPending) {
			t.Fatalf("an answer after the withdrawal: %v", err)
		}
	})
}

// A request times out at its deadline, once.
func TestLifecycleTimeout(t *testing.T) {
	lifecycle(t, hub.Options{}, func(t *testing.T, in *instance, dev *client) {
		req := question("q", "Quick?")
		req.Timeout = time.Second
		done := ask(context.Background(), in, req)
		dev.expect(t, wire.CmdAskQuestion)
		if r := wait(t, done); !errors.Is(r.err, hub.ErrTimeout) {
			t.Fatalf("Ask = %+v, %v", r.rep, r.err)
		}
		if n := dev.expect(t, wire.CmdRequestCancelled); n.GetRequestCancelledNotification().GetReason() != "timeout" {
			t.Fatalf("the device was told %v", n)
		}
	})
}

// The agent's call goes; a call with the same request re-attaches and
// gets the answer.
func TestLifecycleReattach(t *testing.T) {
	lifecycle(t, hub.Options{OrphanNotice: time.Hour}, func(t *testing.T, in *instance, dev *client) {
		ctx, cancel := context.WithCancel(context.Background())
		first := ask(ctx, in, question("q", "Which?"))
		dev.expect(t, wire.CmdAskQuestion)
		cancel()
		if r := wait(t, first); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the call that went: %+v, %v", r.rep, r.err)
		}
		if r := wait(t, ask(context.Background(), in, question("q", "Other?"))); !errors.Is(r.err, hub.ErrDuplicate) {
			t.Fatalf("another request with its ID: %+v, %v", r.rep, r.err)
		}
		// Answered before or after it re-attached: it gets the answer
		// either way, kept for it meanwhile.
		again := ask(context.Background(), in, question("q", "Which?"))
		if err := in.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("dev", "this one")); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, again); r.err != nil || text(r.rep) != "this one" {
			t.Fatalf("the call that came back: %+v, %v", r.rep, r.err)
		}
		if ms := in.hub.TakeMissed(tok, "/src", nil, 0); len(ms) != 0 {
			t.Fatalf("kept an answer its agent had: %+v", ms)
		}
	})
}

// An answer given while no agent waits is kept for the project's next
// call, and handed over once; the first call, re-attaching after that,
// hears where it went.
func TestLifecycleKeptForAMissedAgent(t *testing.T) {
	lifecycle(t, hub.Options{OrphanNotice: time.Hour}, func(t *testing.T, in *instance, dev *client) {
		ctx, cancel := context.WithCancel(context.Background())
		first := ask(ctx, in, question("q", "Which?"))
		dev.expect(t, wire.CmdAskQuestion)
		cancel()
		wait(t, first)
		if err := in.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("pc", "kept")); err != nil {
			t.Fatal(err)
		}
		// Kept as the answer is heard, before the devices are told.
		dev.expect(t, wire.CmdAskQuestionReplyNotification)
		ms := in.hub.TakeMissed(tok, "/src", nil, 0)
		if len(ms) != 1 || ms[0].ID != "q" || text(ms[0].Reply) != "kept" {
			t.Fatalf("handed over %+v", ms)
		}
		if again := in.hub.TakeMissed(tok, "/src", nil, 0); len(again) != 0 {
			t.Fatalf("handed over twice: %+v", again)
		}
		if r := wait(t, ask(context.Background(), in, question("q", "Which?"))); !errors.Is(r.err, hub.ErrHandedOver) {
			t.Fatalf("re-attaching after the hand-over: %+v, %v", r.rep, r.err)
		}
	})
}
