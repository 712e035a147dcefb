package cluster

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// /mcp sessions across instances: what a client does on one instance to
// a session every instance may serve (a call's cancel, the session's
// end) is told to the others on the subject aa.mcp, which every
// instance subscribes to (mcphttp.Peers; what a note says, how it is
// signed and checked, is mcphttp's, peers.go). Core NATS, nothing
// stored: an instance that is not connected when a note goes does not
// hear it.

const mcpSubject = "aa.mcp"

// fromHeader names the instance a note comes from, which skips its own.
const fromHeader = "Aa-Instance"

// maxMCPNote bounds a note read; mcphttp bounds it again.
const maxMCPNote = 4096

// MCPPeers is the /mcp endpoint's link to the other instances
// (mcphttp.Peers).
type MCPPeers struct{ c *Cluster }

// MCP is the /mcp endpoint's link to the other instances.
func (c *Cluster) MCP() MCPPeers { return MCPPeers{c: c} }

// Tell sends note to the other instances. Best effort: a note NATS does
// not take now is not sent later (the connection buffers nothing while
// it reconnects).
func (p MCPPeers) Tell(note []byte) {
	m := nats.NewMsg(mcpSubject)
	m.Header.Set(fromHeader, p.c.o.Instance)
	m.Data = note
	if err := p.c.nc.PublishMsg(m); err != nil {
		p.c.log.Warn("tell the other instances of an /mcp session", "err", err)
	}
}

// Listen hands hear the notes of the other instances, one at a time, on
// the subscription's goroutine, until stop (or the connection's Close).
func (p MCPPeers) Listen(hear func(note []byte)) (stop func(), err error) {
	sub, err := p.c.nc.Subscribe(mcpSubject, func(m *nats.Msg) {
		if m.Header.Get(fromHeader) == p.c.o.Instance || len(m.Data) > maxMCPNote {
			return
		}
		hear(m.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", mcpSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
