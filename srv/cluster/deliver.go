package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// Chat and remote input across instances: the sender's instance asks the
// receiver's instance, by a NATS request on aa.deliver.<instance>, to
// queue the line (hub.Line) to the receiver's connection; the
// answer says it did (an empty reply) or why not. Nothing is stored: a
// line is accepted once the receiver's instance queued it, as on one
// instance, and the sender is told when it was not.

// delivery is a line for one client of a room.
type delivery struct {
	Room string   `json:"room"`
	Line hub.Line `json:"line"`
}

// The answers for a line not queued: the client is not connected
// there, or it did not take the line now (hub.ErrReceiverBusy: it has
// more waiting to be read than chat may take). An instance that does
// not know replyBusy yet reports it as an error, not as delivered.
const (
	replyNoReceiver = "no receiver"
	replyBusy       = "receiver busy"
)

func deliverSubject(instance string) string { return "aa.deliver." + b64(instance) }

// Deliver hands l to its receiver in room on instance at (hub.Peers).
func (c *Cluster) Deliver(ctx context.Context, at, room string, l hub.Line) error {
	b, err := json.Marshal(delivery{Room: room, Line: l})
	if err != nil {
		return fmt.Errorf("encode delivery: %w", err)
	}
	m, err := c.nc.RequestWithContext(ctx, deliverSubject(at), b)
	if errors.Is(err, nats.ErrNoResponders) {
		return hub.ErrNoReceiver // its instance is gone
	}
	if err != nil {
		return fmt.Errorf("deliver to instance %s: %w", at, err)
	}
	switch string(m.Data) {
	case "":
		return nil
	case replyNoReceiver:
		return hub.ErrNoReceiver
	case replyBusy:
		return hub.ErrReceiverBusy
	default:
		return fmt.Errorf("deliver to instance %s: %s", at, m.Data)
	}
}

// serveDeliveries takes the lines other instances send to this one's
// clients. The subscription is the connection's, ended by its Close.
func (c *Cluster) serveDeliveries(h *hub.Hub) error {
	_, err := c.nc.Subscribe(deliverSubject(c.o.Instance), func(m *nats.Msg) {
		_ = m.Respond([]byte(c.deliverLocal(h, m.Data)))
	})
	if err != nil {
		return fmt.Errorf("subscribe to deliveries: %w", err)
	}
	return nil
}

// deliverLocal queues a delivery and returns the answer: empty when done.
// A line is only ever a chat line or a remote-input backspace, which the
// receiver's door encodes.
func (c *Cluster) deliverLocal(h *hub.Hub, data []byte) string {
	var d delivery
	if err := json.Unmarshal(data, &d); err != nil {
		return "unreadable delivery"
	}
	token, ok := c.rooms[d.Room]
	if !ok {
		return replyNoReceiver
	}
	switch err := h.DeliverLocal(token, d.Line); {
	case err == nil:
		return ""
	case errors.Is(err, hub.ErrReceiverBusy):
		return replyBusy
	default:
		return replyNoReceiver
	}
}
