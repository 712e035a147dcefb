package cluster

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// The events of /mcp calls relayed between instances (mcphttp.Streams):
// a call's stream resumed through another instance than the one where
// the call began gets that call's progress, forms and response. Core
// NATS only: an event is of use only while the client waits, and one
// lost is sent again with the next carry (mcphttp, relay.go).

const mcpStreamSubject = "aa.mcp.calls"

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
// time, in the order each one sent them, until stop. Goroutine: the
// subscription's, which stop ends.
func (p MCPPeers) Receive(hear func(msg []byte)) (stop func(), err error) {
	sub, err := p.c.nc.Subscribe(mcpStreamSubject, func(m *nats.Msg) {
		if m.Header.Get(fromHeader) != p.c.run && len(m.Data) > 0 && len(m.Data) <= maxMCPStream {
			hear(m.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", mcpStreamSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
