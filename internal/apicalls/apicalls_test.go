package apicalls

import (
	"context"
	"errors"
	"net/http/httptest"
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

// TestHolds: a call held before it is done waits there, not after; one
// held once done waits there, not before; a form the hold does not take,
// and a method not held, never wait; a call that ends while held is not
// let go on (false); release lets every held call go on, and may be
// called again.
func TestHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hs Holds
		confirm := func(f map[string]string) bool { return f["offset"] != "" }
		before, releaseBefore := hs.Set("getUpdates", false, confirm)
		after, releaseAfter := hs.Set("sendMessage", true, nil)
		req := httptest.NewRequest("POST", "/", nil)
		if h := hs.Of("getUpdates", map[string]string{}); !h.Before(req) || !h.After(req) {
			t.Error("a form the hold does not take waited")
		}
		if h := hs.Of("editMessageText", nil); !h.Before(req) || !h.After(req) {
			t.Error("a method not held waited")
		}
		if !hs.Of("getUpdates", map[string]string{"offset": "7"}).After(req) || !hs.Of("sendMessage", nil).Before(req) {
			t.Error("a call waited where it is not held")
		}
		went := make(chan bool, 2)
		go func() { went <- hs.Of("getUpdates", map[string]string{"offset": "7"}).Before(req) }()
		go func() { went <- hs.Of("sendMessage", nil).After(req) }()
		<-before
		<-after
		synctest.Wait()
		select {
		case <-went:
			t.Fatal("a held call went on before its release")
		default:
		}
		releaseBefore()
		releaseAfter()
		releaseAfter()
		if a, b := <-went, <-went; !a || !b {
			t.Error("a released call was not let go on")
		}
		ctx, cancel := context.WithCancel(t.Context())
		_, _ = hs.Set("sendMessage", true, nil)
		go func() { went <- hs.Of("sendMessage", nil).After(req.WithContext(ctx)) }()
		synctest.Wait()
		cancel()
		if <-went {
			t.Error("a call that ended while held was let go on")
		}
	})
}
