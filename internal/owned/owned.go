// Package owned is the goroutines an owner starts and waits for when it
// closes: the owner's Close stops new ones, tells the running ones to end
// (Done, Context) and waits for them, so nothing it started outlives it.
package owned

import (
	"context"
	"sync"
)

// Group is one owner's goroutines. The zero Group is ready to use; it
// must not be copied. Its lock is a leaf: nothing is called under it,
// so Go and Enter may be called under any of the owner's locks.
type Group struct {
	mu     sync.Mutex
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (g *Group) initLocked() {
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
}

// Go runs f on a goroutine Close waits for. Once Stop or Close has begun
// it runs nothing and returns false.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Enter counts in a goroutine the group did not start (a timer's
// function), so Close waits until it calls Exit. Once Stop or Close has
// begun it returns false, and the caller must not go on.
func (g *Group) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Exit counts out a goroutine that Enter counted in.
func (g *Group) Exit() { g.wg.Done() }

// Context ends when Stop or Close begins.
func (g *Group) Context() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.initLocked()
	return g.ctx
}

// Done is closed when Stop or Close begins.
func (g *Group) Done() <-chan struct{} { return g.Context().Done() }

// Stop refuses new goroutines and ends the Context, without waiting, for
// an owner that has more to end before it waits. Idempotent.
func (g *Group) Stop() {
	g.mu.Lock()
	g.closed = true
	g.initLocked()
	g.mu.Unlock()
	g.cancel()
}

// Wait waits for the goroutines started, and those counted in, to end.
func (g *Group) Wait() { g.wg.Wait() }

// Close is Stop, then Wait. Idempotent; every caller waits.
func (g *Group) Close() {
	g.Stop()
	g.Wait()
}

// A Wake tells an owner's goroutine that there is work, once however
// often it is told before the goroutine looks: the goroutine receives
// from it among what it waits for.
type Wake chan struct{}

// NewWake is a Wake not told yet.
func NewWake() Wake { return make(Wake, 1) }

// Tell wakes the goroutine, unless it is told already. It never blocks.
func (w Wake) Tell() {
	select {
	case w <- struct{}{}:
	default:
	}
}
