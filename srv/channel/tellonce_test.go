package channel

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestTellOnceClaimOfTheDead: an instance notes that it tells a reply
// it was not taken and dies before telling (kill -9). The next to
// handle the reply (its update polled again, its mail read again) waits
// out the claim and tells: never is worse than twice.
func TestTellOnceClaimOfTheDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes := NewMemoryNotes(nil)
		if tell, _ := tellOnce(t.Context(), notes, slog.Default(), "r-1"); !tell {
			t.Fatal("the first to handle the reply does not tell it")
		}
		// … and dies: its finish is never called.
		start := time.Now()
		tell, finish := tellOnce(t.Context(), notes, slog.Default(), "r-1")
		if !tell {
			t.Fatal("a reply whose teller died is never told")
		}
		if waited := time.Since(start); waited < tellClaim {
			t.Errorf("told after %v, before the claim of %v lapsed", waited, tellClaim)
		}
		finish(true)
		if tell, _ := tellOnce(t.Context(), notes, slog.Default(), "r-1"); tell {
			t.Error("told again once told")
		}
	})
}

// TestTellOnceWhileAnotherTells: the reply handled by two instances at
// once (the lead moving): the one that tells finishes while the other
// waits, which then tells nothing; one whose telling failed lets the
// other tell.
func TestTellOnceWhileAnotherTells(t *testing.T) {
	for _, sent := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			notes := NewMemoryNotes(nil)
			tell, finish := tellOnce(t.Context(), notes, slog.Default(), "r-1")
			if !tell {
				t.Fatal("the first does not tell")
			}
			got := make(chan bool, 1)
			go func() {
				tell, _ := tellOnce(context.Background(), notes, slog.Default(), "r-1")
				got <- tell
			}()
			synctest.Wait() // the second waits on the first's claim
			time.Sleep(time.Second)
			finish(sent)
			if tell := <-got; tell == sent {
				t.Errorf("the first's telling sent=%v: the second tells=%v", sent, tell)
			}
		})
	}
}

// TestTellOnceToldByAnOlderInstance: a reply noted told by an instance
// of the version before (a plain note, no claim) is not told again.
func TestTellOnceToldByAnOlderInstance(t *testing.T) {
	notes := NewMemoryNotes(nil)
	if err := notes.Put(t.Context(), "told.r-1", []byte{1}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tell, _ := tellOnce(t.Context(), notes, slog.Default(), "r-1"); tell {
		t.Error("told again")
	}
}

// countedNotes count the creates of outageNotes; past giveUp each fails,
// so that a loop that never waits ends.
type countedNotes struct {
	*outageNotes
	creates atomic.Int32
	giveUp  int32
}

func (c *countedNotes) Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error) {
	if c.creates.Add(1) > c.giveUp {
		return false, errNoQuorum
	}
	return c.outageNotes.Create(ctx, key, value, until)
}

// TestTellOnceWaitsForItsOwnUnwrittenRelease: an instance fails to tell
// a reply and cannot note so (the store lost its quorum just then): the
// release of its claim is kept to be written later, and the claim stays
// in the store meanwhile. Handling the reply again there, with the store
// back, reads no claim here and cannot create one there: that is waited
// out as another's claim would be, not tried again at once and again,
// as fast as the store answers.
func TestTellOnceWaitsForItsOwnUnwrittenRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countedNotes{outageNotes: newOutageNotes(), giveUp: 1000}
		notes := newLaterNotes(store, nil, slog.Default())
		tell, finish := tellOnce(t.Context(), notes, slog.Default(), "r-1")
		if !tell {
			t.Fatal("the first to handle the reply does not tell it")
		}
		store.down.Store(true)
		finish(false) // its release kept here, its claim in the store
		store.down.Store(false)

		store.creates.Store(0)
		if tell, _ := tellOnce(t.Context(), notes, slog.Default(), "r-1"); !tell {
			t.Error("the reply is never told")
		}
		if n := store.creates.Load(); n > 20 {
			t.Errorf("tried to claim the reply %d times without waiting", n)
		}
	})
}

// TestTellOnceOnTheNotesClock: a claim's end is written on the clock its
// notes judge ends by (in a cluster, NATS's), not on this machine's. On
// notes whose clock is a minute ahead, a claim made a moment ago still
// holds: the reply handled again meanwhile waits for it and is told
// once.
func TestTellOnceOnTheNotesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes := NewMemoryNotes(func() time.Time { return time.Now().Add(time.Minute) })
		tell, finish := tellOnce(t.Context(), notes, slog.Default(), "r-1")
		if !tell {
			t.Fatal("the first does not tell")
		}
		got := make(chan bool, 1)
		go func() {
			tell, _ := tellOnce(context.Background(), notes, slog.Default(), "r-1")
			got <- tell
		}()
		synctest.Wait() // the second waits on the first's claim, or told already
		finish(true)
		if <-got {
			t.Error("a claim made a moment ago was taken as lapsed: told twice")
		}
	})
}
