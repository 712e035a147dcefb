package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestSettledAndClearedWhileAway: instance C shows a question, then
// loses NATS; meanwhile the question is answered through A and the
// history cleared, which deletes its record. When C is back its watch
// goes on from the next revision and finds the record's delete only
// (the bucket keeps one revision of a key). C ends the question there:
// its devices are told it is no longer pending, and it is not
// answerable nor timed out against a record that is gone.
func TestSettledAndClearedWhileAway(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	c := start(t, "nats://"+link.Addr(), "c")
	dev := newClient("dev")
	c.hub.Join(tok, dev, nil, hub.Resume{})
	asked := ask(context.Background(), a, question("q1", "Ready?"))
	dev.expect(t, "AskQuestion")

	link.SetDown(true)
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "q1", reply("pc", "Yes.")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, asked); r.err != nil || text(r.rep) != "Yes." {
		t.Fatalf("the agent got %+v", r)
	}
	if n, err := a.c.ClearHistory(context.Background(), store.Room(tok), nil); err != nil || n != 1 {
		t.Fatalf("cleared %d: %v", n, err)
	}
	link.SetDown(false)

	n := dev.expect(t, "RequestCancelled").GetRequestCancelledNotification()
	if n.GetRequestId() != "q1" || n.GetReason() != hub.ReasonNoLongerPending {
		t.Fatalf("told %v", n)
	}
	if c.hub.Validity(tok, []string{"q1"})["q1"] {
		t.Fatal("still pending on C")
	}
}
