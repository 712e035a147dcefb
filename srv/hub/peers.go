package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// Cluster mode: the devices of the other instances.
//
// A room's clients are those connected here; the devices connected to the
// other instances of a cluster are its remote users, told to the hub by
// the cluster (RemoteJoin, RemoteLeave). They are listed (OnlineUsers),
// announced (connected, disconnected) and reachable by chat and remote
// input (through Peers.Deliver), never sent request events: their own
// instance does that.
//
// Without Peers (one process) a room has no remote users and none of this
// runs.

// Peers is the rest of a cluster for presence and chat. The Shared store
// of a cluster provides it (Options.Shared implementing Peers).
type Peers interface {
	// Joined says that c is in room (the room's digest) on this instance,
	// under its nickname now (again after a rename). It must not block.
	Joined(room string, c Client)
	// Left says that c left room. It must not block.
	Left(room string, c Client)
	// Deliver hands l, for the client l.To.ID of room, to the instance
	// at, and returns once that instance queued it to the client's
	// connection (DeliverLocal); ErrNoReceiver when the client is not
	// there, ErrReceiverBusy when it did not take the line now.
	Deliver(ctx context.Context, at, room string, l Line) error
}

// RemoteUser is a device connected to another instance of the cluster.
type RemoteUser struct {
	ID          string
	Nickname    string
	ConnectedAt time.Time
	Instance    string
}

// remote is a RemoteUser as one of a room's online users.
type remote struct {
	u     RemoteUser
	order uint64 // join order, among the room's local joins
}

// remote implements Client for the presence notes; it is never in a
// room's clients, so nothing is ever sent to it.
func (m *remote) ID() string             { return m.u.ID }
func (m *remote) Nickname() string       { return m.u.Nickname }
func (m *remote) ConnectedAt() time.Time { return m.u.ConnectedAt }
func (m *remote) Send(*Note) bool        { return false }

// deliverTimeout bounds handing a chat line to another instance.
const deliverTimeout = 5 * time.Second

// RemoteJoin adds u, a device of another instance, to the online users of
// token and tells the clients here; a device already known under another
// nickname is announced again (a rename).
func (h *Hub) RemoteJoin(token string, u RemoteUser) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients[u.ID] != nil {
		return // connected here: the local client is the one listed
	}
	if m := r.remote[u.ID]; m != nil {
		if m.u == u {
			return
		}
		m.u = u
		r.announceLocked(m, wire.StatusConnected, h.now())
		return
	}
	if r.remote == nil {
		r.remote = make(map[string]*remote)
	}
	r.joins++
	m := &remote{u: u, order: r.joins}
	r.remote[u.ID] = m
	r.announceLocked(m, wire.StatusConnected, h.now())
}

// RemoteLeave removes the device id of instance from the online users of
// token, and tells the clients here.
func (h *Hub) RemoteLeave(token, instance, id string) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.remote[id]
	if m == nil || m.u.Instance != instance {
		return
	}
	delete(r.remote, id)
	if len(r.remote) == 0 {
		r.remote = nil
	}
	r.announceLocked(m, wire.StatusDisconnected, h.now())
}

// DeliverLocal queues l, a chat line or remote-input backspace from a
// device of another instance, to the client l.To.ID of token connected
// here.
func (h *Hub) DeliverLocal(token string, l Line) error {
	r := h.room(token)
	r.mu.Lock()
	recv := r.clients[l.To.ID]
	r.mu.Unlock()
	if recv == nil {
		return ErrNoReceiver
	}
	if !recv.Send(&Note{Kind: NoteLine, Line: &l}) {
		return ErrReceiverBusy
	}
	return nil
}

// deliver hands l to the remote device m through its instance.
func (h *Hub) deliver(r *room, m *remote, l Line) error {
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	err := h.peers.Deliver(ctx, m.u.Instance, r.digest, l)
	if err == nil || errors.Is(err, ErrNoReceiver) || errors.Is(err, ErrReceiverBusy) {
		return err
	}
	h.log.Warn("chat not handed to the receiver's instance", "instance", m.u.Instance, "err", err)
	return fmt.Errorf("%w: its server did not take the message", ErrNoReceiver)
}
