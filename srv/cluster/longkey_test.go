package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestLongIDKeepsNATS: a token holder's answer or cancel names any ID
// (a /ws frame, a Connect call). One longer than NATS takes in a
// subject (its control line, 4 KB) is no request of the bucket: it is
// not pending, and the instance's link to NATS stays up, its next
// question asked and answered across instances as before. NATS closes
// for good a connection that sends it such a subject.
func TestLongIDKeepsNATS(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onB := newClient("pb")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	ctx := context.Background()
	for _, n := range []int{3000, 64 << 10} {
		long := strings.Repeat("x", n)
		if err := a.hub.Answer(ctx, tok, wire.AskQuestion, long, reply("pa", "yes")); !errors.Is(err, hub.ErrNotPending) {
			t.Fatalf("answer of a %d-byte ID: %v, want hub.ErrNotPending", n, err)
		}
		if err := a.hub.Cancel(ctx, tok, long); !errors.Is(err, hub.ErrNotPending) {
			t.Fatalf("cancel of a %d-byte ID: %v, want hub.ErrNotPending", n, err)
		}
		if _, _, err := a.c.Get(ctx, "room", long); !errors.Is(err, hub.ErrRecordMissing) {
			t.Fatalf("Get of a %d-byte ID: %v, want hub.ErrRecordMissing", n, err)
		}
		rec := hub.SharedRecord{}
		rec.Room, rec.ID = "room", long
		if _, err := a.c.Create(ctx, rec); err == nil || errors.Is(err, hub.ErrUnreachable) {
			t.Fatalf("Create of a %d-byte ID: %v, want refused, NATS still reachable", n, err)
		}
	}
	done := ask(ctx, a, question("q1", "Still linked?"))
	onB.expect(t, wire.CmdAskQuestion)
	if err := b.hub.Answer(ctx, tok, wire.AskQuestion, "q1", reply("pb", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("Ask after the long IDs = %+v, %v", r.rep, r.err)
	}
}
