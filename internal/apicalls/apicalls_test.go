package apicalls

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

// TestChangesAwait: Await returns once a change makes ok hold, not
// before; and when its context ends.
func TestChangesAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu sync.Mutex
			c  Changes
			n  int
		)
		done := make(chan error)
		go func() { done <- c.Await(t.Context(), &mu, func() bool { return n >= 2 }) }()
		for i := range 2 {
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("returned (%v) at %d changes, before ok held", err, i)
			default:
			}
			mu.Lock()
			n++
			c.Changed()
			mu.Unlock()
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { done <- c.Await(ctx, &mu, func() bool { return false }) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Await = %v, want its context's end", err)
		}
	})
}
