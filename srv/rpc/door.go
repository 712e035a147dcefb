package rpc

import "context"

// The door a Connect call came through: agentassistant-mcp over the
// network ("connect"), or the server's own /mcp endpoint in process
// ("mcp"). The server marks its in-process calls; a client cannot.
type doorKey struct{}

// WithDoor marks ctx as a call that came through door.
func WithDoor(ctx context.Context, door string) context.Context {
	return context.WithValue(ctx, doorKey{}, door)
}

func doorOf(ctx context.Context) string {
	if d, ok := ctx.Value(doorKey{}).(string); ok {
		return d
	}
	return "connect"
}
