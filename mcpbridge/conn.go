package mcpbridge

import (
	"context"
	"errors"
	"sync"
)

type connKey struct{}

// WithConnection marks a tool call's ctx as served over conn, a context
// that ends with the MCP client's connection (an HTTP request's context).
// A call cut short because conn ended leaves its request pending for the
// next call from the project, as one cut short by Options.Done does; a
// call the client cancelled (notifications/cancelled) withdraws it.
func WithConnection(ctx, conn context.Context) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

// sessionEnded says what ended, when a call was cut short because its
// MCP session or connection ended rather than because the client
// cancelled it.
func (b *bridge) sessionEnded(ctx context.Context) (what string, ended bool) {
	select {
	case <-b.o.Done:
		return b.o.Stopped, true
	default:
	}
	if c, _ := ctx.Value(connKey{}).(context.Context); c != nil && c.Err() != nil {
		return "The MCP client's connection ended", true
	}
	return "", false
}

type writesKey struct{}

// WithWrites tells the calls served in ctx how many times the transport
// has written to the client on their session so far (flushes, on all of
// its streams), so that a call can wait until what it queued for the
// client is out before its own result goes (see delivered).
func WithWrites(ctx context.Context, written func() uint64) context.Context {
	return context.WithValue(ctx, writesKey{}, written)
}

// A Link is the MCP client's connection to one call, which may break and
// come back: a stream the client resumes (Last-Event-ID).
type Link interface {
	// State reports whether the client is connected to the call now, and
	// gives a channel closed at the next change.
	State() (up bool, changed <-chan struct{})
}

type linkKey struct{}

// WithLink marks a tool call's ctx as served over l. While l is down the
// call does not wait on the server: an answer given meanwhile stays
// there, kept, rather than taken by a call no one hears. Once l is up
// again the call re-attaches to its request by ID and gets it. How long
// l may stay down is the caller's to bound: it ends ctx (or the
// connection of WithConnection) then.
func WithLink(ctx context.Context, l Link) context.Context {
	return context.WithValue(ctx, linkKey{}, l)
}

// errDetached ends a wait on the server while the client is away.
var errDetached = errors.New("the MCP client's connection is down")

// watchLink ends an attempt (stop, with errDetached) once ctx's link goes
// down. done ends the watch and waits for it.
func watchLink(ctx context.Context, stop context.CancelCauseFunc) (done func()) {
	l, _ := ctx.Value(linkKey{}).(Link)
	if l == nil {
		return func() {}
	}
	return goUntil(ctx, func(ctx context.Context) {
		for {
			up, changed := l.State()
			if !up {
				stop(errDetached)
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	})
}

// goUntil runs f in a goroutine of its own until stop, which ends f's
// ctx and waits for f to return.
func goUntil(ctx context.Context, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// linkUp waits until ctx's link is up; false when ctx ends first.
func linkUp(ctx context.Context) bool {
	l, _ := ctx.Value(linkKey{}).(Link)
	for l != nil {
		up, changed := l.State()
		if up {
			return ctx.Err() == nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}
