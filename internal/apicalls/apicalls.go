// Package apicalls is what the doubles of web APIs (internal/telegramtest,
// internal/slacktest) share: the calls they record, and the wait for the
// n-th call of a method.
package apicalls

import (
	"context"
	"fmt"
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
