package channel

import (
	"context"
	"log/slog"
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
