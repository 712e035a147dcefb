package mcpbridge

import "context"

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
