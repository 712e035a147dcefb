package hub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeadlineKeptWhenTheClockMovesBack: a deadline is a time on the
// hub's clock, which in a cluster is NATS's as this instance reckons it
// (cluster.Now): that reckoning may move after a deadline's timer is
// armed (corrected at a heartbeat, or another NATS server leading). A
// question is not timed out before its deadline on the clock as it
// stands when the timer fires: it waits the rest, and times out then.
func TestDeadlineKeptWhenTheClockMovesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var offset atomic.Int64
		h := New(Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
		defer h.Close()
		h.Join("tok", newFake("c"), nil, Resume{})

		start := time.Now()
		_, ec := ask(h, "tok", "q", 10*time.Second, context.Background())
		synctest.Wait()
		offset.Store(int64(-5 * time.Second)) // the hub's clock corrected back by 5 s
		if err := <-ec; !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if waited := time.Since(start); waited < 15*time.Second {
			t.Errorf("timed out %v after it was asked, at %v on the hub's clock, before its deadline of 10s", waited, waited-5*time.Second)
		}
	})
}

// TestLateLooksAfterTheClockMovesBack: a room's budget of looks for
// requests not heard yet refills with time on the hub's clock; that
// clock corrected back by minutes leaves the budget as it was, not owing
// minutes of looks (an answer to a question asked a moment ago on
// another instance refused as not pending for that long).
func TestLateLooksAfterTheClockMovesBack(t *testing.T) {
	var l lateLooks
	now := time.Unix(1_800_000_000, 0)
	for i := range lateBurst {
		if !l.take("id", now) {
			t.Fatalf("look %d refused within the burst", i)
		}
	}
	now = now.Add(-10 * time.Minute) // corrected back
	l.take("id", now)
	now = now.Add(time.Second)
	if !l.take("id", now) {
		t.Error("a look a second after the clock moved back is refused")
	}
}
