package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// The events of /mcp calls relayed between instances (mcphttp.Streams):
// a call's stream resumed through another instance than the one where
// the call began gets that call's progress, forms and response. Core
// NATS only: an event is of use only while the client waits, and one
// lost is sent again with the next carry (mcphttp, relay.go).

const mcpStreamSubject = "aa.mcp.calls"

// Whether the instance where a call began is still there to relay its
// events (mcphttp.Origins): while an instance hears the relayed events,
// its run answers a NATS request on aa.mcp.runs.<run> (empty). The NATS
// server answers at once that no one listens once the run's connection
// is gone: a process killed closes it, and the server drops it then; a
// host lost is dropped after the server's ping interval.
const mcpRunSubject = "aa.mcp.runs."

// maxRun bounds a run's name read from an event ID: ours are 24 hex
// digits (wire.NewID).
const maxRun = 64

// Run names this run of the instance (mcphttp.Origins).
func (p MCPPeers) Run() string { return p.c.run }

// Gone reports whether run is known gone: NATS says no one answers for
// it. Any other failure (NATS away, no answer before ctx ends: a paused
// process) says nothing (mcphttp.Origins).
func (p MCPPeers) Gone(ctx context.Context, run string) bool {
	if run == "" || len(run) > maxRun || strings.Trim(run, "0123456789abcdef") != "" {
		return false // not a run's name: a subject is made of none other
	}
	_, err := p.c.nc.RequestWithContext(ctx, mcpRunSubject+run, nil)
	return errors.Is(err, nats.ErrNoResponders)
}

// maxMCPStream bounds a relayed message read; mcphttp bounds it again.
const maxMCPStream = 64 << 10

// Send sends msg to the other instances. Best effort: the connection
// buffers it, and a publish it cannot take is dropped.
func (p MCPPeers) Send(msg []byte) {
	m := nats.NewMsg(mcpStreamSubject)
	m.Header.Set(fromHeader, p.c.run)
	m.Data = msg
	if err := p.c.nc.PublishMsg(m); err != nil {
		p.c.log.Debug("relay an /mcp call's event to the other instances", "err", err)
	}
}

// Receive hands hear the messages of the other instances, one at a
// time, in the order each one sent them, until stop; meanwhile this
// run answers that it is there (Gone). Goroutines: the subscriptions',
// which stop ends.
func (p MCPPeers) Receive(hear func(msg []byte)) (stop func(), err error) {
	sub, err := p.c.nc.Subscribe(mcpStreamSubject, func(m *nats.Msg) {
		if m.Header.Get(fromHeader) != p.c.run && len(m.Data) > 0 && len(m.Data) <= maxMCPStream {
			hear(m.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", mcpStreamSubject, err)
	}
	here, err := p.c.nc.Subscribe(mcpRunSubject+p.c.run, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to %s: %w", mcpRunSubject+p.c.run, err)
	}
	// The server takes a subscription on its own time: until it has,
	// this run would be told gone. Not an error: it is there soon.
	if err := p.c.nc.FlushTimeout(probeTimeout); err != nil {
		p.c.log.Debug("this run's subscriptions not confirmed yet", "err", err)
	}
	return func() {
		_ = sub.Unsubscribe()
		_ = here.Unsubscribe()
	}, nil
}
