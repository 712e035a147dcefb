// Package apicalls is what the doubles of web APIs (internal/telegramtest,
// internal/slacktest) share: the calls they record, the wait for the
// n-th call of a method, the wait on a change of their state, and the
// calls they hold until the test lets them go on.
package apicalls

import (
	"context"
	"fmt"
	"net/http"
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

// Holds are the methods whose calls a double makes wait until the test
// lets them go on: before a call is done, or once it is done and before
// it is answered. The zero Holds is ready to use; the double's lock
// guards it.
type Holds struct{ m map[string]*Hold }

// Hold is the wait of a held method's calls; a nil Hold never waits.
type Hold struct {
	arrived, release chan struct{}
	once             sync.Once
	when             func(form map[string]string) bool // nil: every call
	after            bool                              // once done, before the answer
}

// Set makes the calls of method whose form when accepts (nil: every
// one) wait, before they are done or, with after, once done and before
// they are answered, until release is called (once); arrived is closed
// when the first comes. Called with the double's lock held.
func (hs *Holds) Set(method string, after bool, when func(form map[string]string) bool) (arrived <-chan struct{}, release func()) {
	a, r := make(chan struct{}), make(chan struct{})
	if hs.m == nil {
		hs.m = map[string]*Hold{}
	}
	hs.m[method] = &Hold{arrived: a, release: r, when: when, after: after}
	var once sync.Once
	return a, func() { once.Do(func() { close(r) }) }
}

// Of is the hold of a call of method with form, nil when none. Called
// with the double's lock held.
func (hs *Holds) Of(method string, form map[string]string) *Hold {
	if h := hs.m[method]; h != nil && (h.when == nil || h.when(form)) {
		return h
	}
	return nil
}

// Before waits, for a call held before it is done, until it is let go
// on or r ends (false).
func (h *Hold) Before(r *http.Request) bool { return h == nil || h.after || h.wait(r) }

// After waits, for a call held once done, until it is let go on or r
// ends (false).
func (h *Hold) After(r *http.Request) bool { return h == nil || !h.after || h.wait(r) }

func (h *Hold) wait(r *http.Request) bool {
	h.once.Do(func() { close(h.arrived) })
	select {
	case <-h.release:
		return true
	case <-r.Context().Done():
		return false
	}
}
