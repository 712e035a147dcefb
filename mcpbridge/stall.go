package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A waiting call's server may stop answering without the link saying so:
// a process paused (SIGSTOP) or a machine frozen keeps its TCP
// connections, and the call would wait out its whole deadline while the
// person's answer, given through another instance, waits for it. With a
// Probe, the bridge checks the server every ProbeEvery while a call
// waits; after probeFails failures in a row it makes the call again (it
// re-attaches by the request's ID), through the next server.

// probeFails failures in a row make a server stalled.
const probeFails = 2

// errStalled ends an attempt whose server stopped answering.
var errStalled = errors.New("the server stopped answering")

// watchStall probes while an attempt waits, and ends it with errStalled
// (the cause of ctx) once the server is found stalled. stop ends the
// probing and waits for it.
func (b *bridge) watchStall(ctx context.Context, stall context.CancelCauseFunc) (stop func()) {
	if b.o.Probe == nil {
		return func() {}
	}
	return goUntil(ctx, func(ctx context.Context) {
		t := time.NewTicker(b.o.ProbeEvery)
		defer t.Stop()
		fails := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			skip, err := b.o.Probe(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				fails = 0
				continue
			}
			if fails++; fails < probeFails {
				continue
			}
			b.log.Warn("the server stopped answering; re-attaching through the next", "err", err)
			if skip != nil {
				skip()
			}
			stall(fmt.Errorf("%w: %w", errStalled, err))
			return
		}
	})
}
