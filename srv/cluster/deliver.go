package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Chat and remote input across instances: the sender's instance builds
// the frame and asks the receiver's instance, by a NATS request on
// aa.deliver.<instance>, to queue it to the receiver's connection; the
// answer says it did (an empty reply) or why not. Nothing is stored: a
// line is accepted once the receiver's instance queued it, as on one
// instance, and the sender is told when it was not.

// delivery is a frame for one client of a room.
type delivery struct {
	Room  string `json:"room"`
	To    string `json:"to"`
	Frame []byte `json:"frame"`
}

// replyNoReceiver is the answer for a client not connected there.
const replyNoReceiver = "no receiver"

func deliverSubject(instance string) string { return "aa.deliver." + instanceKey(instance) }

// Deliver hands frame to client to of room on instance at (hub.Peers).
func (c *Cluster) Deliver(ctx context.Context, at, room, to string, frame []byte) error {
	b, err := json.Marshal(delivery{Room: room, To: to, Frame: frame})
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
	default:
		return fmt.Errorf("deliver to instance %s: %s", at, m.Data)
	}
}

// serveDeliveries takes the frames other instances send to this one's
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
// Only chat and remote-input frames are taken.
func (c *Cluster) deliverLocal(h *hub.Hub, data []byte) string {
	var d delivery
	if err := json.Unmarshal(data, &d); err != nil {
		return "unreadable delivery"
	}
	token, ok := c.rooms[d.Room]
	if !ok {
		return replyNoReceiver
	}
	var m pb.WebsocketMessage
	if err := proto.Unmarshal(d.Frame, &m); err != nil || (m.Cmd != wire.CmdChatMessageNotification && m.Cmd != wire.CmdSendBackspace) {
		return "not a chat or remote-input frame"
	}
	if err := h.DeliverLocal(token, d.To, d.Frame); err != nil {
		return replyNoReceiver
	}
	return ""
}
