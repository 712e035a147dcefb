package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestClosedRecordIsReadByAnEarlierBuild: a close pushed is stored as
// the plain "closed" that builds before the records carried JSON read,
// so that an instance not yet upgraded, about to push the question,
// sees its close pushed and does not push it after its close (which
// would leave it showing on the device), nor push the close again.
func TestClosedRecordIsReadByAnEarlierBuild(t *testing.T) {
	ns := natstest.Start(t)
	p := openPushOf(t, start(t, ns.URL(), "a"))
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

// TestCloseHeldByALiveInstanceIsNotTakenOver: a close B decided and has
// not pushed yet (its push service is slow) is no other instance's to
// push while B's run lives, however long it has stood short of
// staleClose: taken over, the device would get it twice. Once B is gone
// (its heartbeat ended), the close is left, and A adopts it; and so is
// one written by an earlier run of an instance named as a live one.
func TestCloseHeldByALiveInstanceIsNotTakenOver(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	pa, pb := openPushOf(t, a), openPushOf(t, b)
	eventually(t, "B's heartbeat", func() bool {
		_, err := pa.insts.Get(t.Context(), "b")
		return err == nil
	})
	room := store.Room(tok)
	if ok, err := pb.Closing(t.Context(), room, "q1", "s1"); !ok || err != nil {
		t.Fatalf("Closing on B: %v, %v", ok, err)
	}
	l := push.Left{Token: tok, Room: room, ID: "q1", Sub: "s1", Owed: true}
	if left, err := pa.Left(t.Context(), 0); len(left) != 0 || err != nil {
		t.Errorf("Left lists a close B holds: %v, %v", left, err)
	}
	if ok, err := pa.Adopt(t.Context(), l, 0); ok || err != nil {
		t.Errorf("A adopted a close B holds: %v, %v", ok, err)
	}

	// An earlier run of A's name wrote q2's: A's run now holds none of it.
	v, _ := json.Marshal(closeRecord{State: closeClosing, By: "a", Run: "earlier", Room: room, ID: "q2", Sub: "s1"})
	if _, err := pa.claims.Put(t.Context(), closeKey(room, "q2", "s1"), v); err != nil {
		t.Fatal(err)
	}
	l2 := push.Left{Token: tok, Room: room, ID: "q2", Sub: "s1", Owed: true}
	if left, err := pa.Left(t.Context(), 0); !slices.Equal(left, []push.Left{l2}) || err != nil {
		t.Errorf("Left: %v, %v; want the close of an earlier run, %v", left, err, l2)
	}

	b.c.Close() // B ends: its heartbeat goes
	eventually(t, "B's heartbeat gone", func() bool {
		_, err := pa.insts.Get(t.Context(), "b")
		return err != nil
	})
	if left, err := pa.Left(t.Context(), 0); len(left) != 2 || err != nil {
		t.Errorf("Left: %v, %v; want B's close and the earlier run's", left, err)
	}
	if ok, err := pa.Adopt(t.Context(), l, 0); !ok || err != nil {
		t.Errorf("A did not adopt the close B left: %v, %v", ok, err)
	}
}

// TestLeftRule: what makes a close's record left to any instance.
func TestLeftRule(t *testing.T) {
	const takeOver = 38 * time.Second
	alive := func(closeRecord) bool { return true }
	gone := func(closeRecord) bool { return false }
	rec := func(s string) closeRecord {
		return closeRecord{State: s, By: "b", Run: "r1", Room: "room", ID: "q", Sub: "s"}
	}
	for _, c := range []struct {
		r    closeRecord
		age  time.Duration
		held func(closeRecord) bool
		want bool
	}{
		{rec(closeClosing), takeOver, gone, true},
		{rec(closeClosing), takeOver, alive, false},
		{rec(closeClosing), takeOver - time.Second, gone, false},
		{rec(closeClosing), staleClose, alive, true}, // lost by its instance
		{rec(closeOwed), takeOver, gone, true},
		{rec(closeOwed), takeOver, alive, false},
		{rec(closePushing), takeOver, alive, false},
		{rec(closePushing), takeOver, gone, true},
		{rec(closePushed), takeOver, alive, true}, // settled elsewhere, no close decided
		{rec(closeClosed), staleClose, gone, false},
		{closeRecord{State: closeClosing}, staleClose, gone, false}, // an earlier build's: what of, unknown
	} {
		if got := left(c.r, c.age, takeOver, c.held); got != c.want {
			t.Errorf("left(%+v, %v): %v, want %v", c.r, c.age, got, c.want)
		}
	}
}

// openPushOf opens in's share of Web Push.
func openPushOf(t *testing.T, in *instance) *Push {
	t.Helper()
	p, err := in.c.OpenPush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
