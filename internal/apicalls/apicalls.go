// Package apicalls is what the doubles of web APIs (internal/telegramtest,
// internal/slacktest) share: the calls they record, the wait for the
// n-th call of a method, and the wait on a change of their state.
package apicalls

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Call is one call a double took.
type Call struct {
	Method string
	// Form is its parameters, as the double records them.
	Form map[string]string
	// At is when it arrived.
	At time.Time
}

// Waiter is a double's wait on its calls: until done, given the calls
// so far, holds, or ctx ends.
type Waiter func(ctx context.Context, done func([]Call) bool) error

// Nth is the n-th (from 1) call of method among calls.
func Nth(calls []Call, method string, n int) (Call, bool) {
	seen := 0
	for _, c := range calls {
		if c.Method == method {
			if seen++; seen == n {
				return c, true
			}
		}
	}
	return Call{}, false
}

// Wait is the n-th call of method, once it came (within ctx).
func Wait(ctx context.Context, w Waiter, method string, n int) (Call, error) {
	var c Call
	err := w(ctx, func(calls []Call) bool {
		var ok bool
		c, ok = Nth(calls, method, n)
		return ok
	})
	if err != nil {
		return Call{}, fmt.Errorf("wait for %s #%d: %w", method, n, err)
	}
	return c, nil
}

// Form is the form of the n-th call of method; t fails when it does not
// come within 10 s.
func Form(t testing.TB, w Waiter, method string, n int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Wait(ctx, w, method, n)
	if err != nil {
		t.Fatal(err)
	}
	return c.Form
}

// Changes is when a double's state changes, for those that wait on it
// (Await). The zero Changes is ready to use; the double's lock guards
// it.
type Changes struct{ ch chan struct{} }

// Next is closed at the next change. Called with the double's lock held.
func (c *Changes) Next() <-chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Changed wakes those waiting. Called with the double's lock held.
func (c *Changes) Changed() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Await waits until ok, called with mu (the double's lock) held, holds,
// or ctx ends.
func (c *Changes) Await(ctx context.Context, mu sync.Locker, ok func() bool) error {
	for {
		mu.Lock()
		done, next := ok(), c.Next()
		mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
