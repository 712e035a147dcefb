package mcpbridge

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// progress sends notifications/progress every ProgressInterval while a
// call waits, when the client asked for them with a progressToken, so that
// clients which reset their timeout on progress keep waiting. The returned
// stop ends the sender and waits for it.
func (b *bridge) progress(ctx context.Context, req mcp.CallToolRequest, timeout time.Duration) (stop func()) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return func() {}
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return func() {}
	}
	token := req.Params.Meta.ProgressToken
	return goUntil(ctx, func(ctx context.Context) {
		t := time.NewTicker(b.o.ProgressInterval)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				waited := now.Sub(start)
				err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": token,
					"progress":      int(waited.Seconds()),
					"total":         int(timeout.Seconds()),
					"message":       fmt.Sprintf("Waiting for the person to answer (%s of %s)", waited.Round(time.Second), timeout),
				})
				if err != nil {
					b.log.Debug("progress notification", "err", err)
				}
			}
		}
	})
}
