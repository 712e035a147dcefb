package owned

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestCloseWaits: Close returns only after every goroutine started with
// Go, and every caller counted in with Enter, is done.
func TestCloseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		release := make(chan struct{})
		var done atomic.Int32
		for range 3 {
			if !g.Go(func() { <-release; done.Add(1) }) {
				t.Fatal("Go refused before Close")
			}
		}
		if !g.Enter() {
			t.Fatal("Enter refused before Close")
		}
		closed := make(chan struct{})
		go func() { g.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while goroutines run")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while an Enter is not yet Exit")
		default:
		}
		g.Exit()
		<-closed
		if done.Load() != 3 {
			t.Fatalf("done = %d, want 3", done.Load())
		}
	})
}

// TestClosingRefuses: once Close begins, Go runs nothing and Enter is
// refused; Done is closed and the context ended; Close is idempotent.
func TestClosingRefuses(t *testing.T) {
	var g Group
	ctx := g.Context()
	select {
	case <-g.Done():
		t.Fatal("Done closed before Close")
	default:
	}
	g.Close()
	g.Close()
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go accepted after Close")
	}
	if g.Enter() {
		t.Fatal("Enter accepted after Close")
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("Done open after Close")
	}
	if ctx.Err() == nil || g.Context().Err() == nil {
		t.Fatal("context not ended by Close")
	}
}

// TestStopThenWait: Stop refuses new goroutines at once; Wait waits for
// those already started.
func TestStopThenWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		release := make(chan struct{})
		ran := false
		g.Go(func() { <-release; ran = true })
		g.Stop()
		if g.Go(func() {}) {
			t.Fatal("Go accepted after Stop")
		}
		waited := make(chan struct{})
		go func() { g.Wait(); close(waited) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while a goroutine runs")
		default:
		}
		close(release)
		<-waited
		if !ran {
			t.Fatal("the goroutine did not finish")
		}
	})
}

// TestWake: told twice before its goroutine looks, a Wake wakes it once,
// without blocking the second teller; told after it looked, again.
func TestWake(t *testing.T) {
	w := NewWake()
	w.Tell()
	w.Tell()
	for i, want := range []bool{true, false} {
		select {
		case <-w:
			if !want {
				t.Fatalf("look %d: woken again by a tell it had taken", i+1)
			}
		default:
			if want {
				t.Fatalf("look %d: not woken", i+1)
			}
		}
	}
	w.Tell()
	select {
	case <-w:
	default:
		t.Fatal("not woken by a tell after it looked")
	}
}
