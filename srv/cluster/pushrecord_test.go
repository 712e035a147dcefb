package cluster

import (
	"context"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestClosedRecordIsReadByAnEarlierBuild: a close pushed is stored as
// the plain "closed" that builds before the records carried JSON read,
// so that an instance not yet upgraded, about to push the question,
// sees its close pushed and does not push it after its close (which
// would leave it showing on the device), nor push the close again.
func TestClosedRecordIsReadByAnEarlierBuild(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	p, err := a.c.OpenPush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	room := store.Room(tok)
	if ok, err := p.Closing(t.Context(), room, "q1", "s1"); !ok || err != nil {
		t.Fatalf("Closing: %v, %v", ok, err)
	}
	if err := p.Closed(t.Context(), room, "q1", "s1"); err != nil {
		t.Fatal(err)
	}
	e, err := p.claims.Get(context.Background(), closeKey(room, "q1", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Value()); got != closeClosed {
		t.Errorf("a close pushed is stored as %q, which an earlier build does not read as %q", got, closeClosed)
	}
	if ok, err := p.Pushing(t.Context(), room, "q1", "s1"); ok || err != nil {
		t.Errorf("Pushing after the close: %v, %v; want false", ok, err)
	}
	left, err := p.Left(t.Context(), 0)
	if err != nil || len(left) != 0 {
		t.Errorf("Left lists a close pushed: %v, %v", left, err)
	}
}
