package hub

import "github.com/agentassistant/agentassistant/internal/wire"

// Chat and remote input between two clients of a room.

// Chat delivers a chat message from one client of token to another, and
// returns the line as it went. A receiver that does not take it now (its
// door keeps its queue for what it must not miss) is ErrReceiverBusy: the
// sender is told, the receiver stays.
//
// In cluster mode a receiver connected to another instance gets it
// through that instance; Chat returns once that instance queued it to the
// receiver's connection (what a chat accepted means on one instance too),
// ErrNoReceiver when it did not.
func (h *Hub) Chat(token string, from Client, to, content string) (Line, error) {
	l := Line{ID: wire.NewID(), From: userOf(from), Content: content, SentAt: h.now()}
	if err := h.send(h.room(token), &l, to); err != nil {
		return Line{}, err
	}
	return l, nil
}

// Backspace forwards a remote-input backspace from one client of token to
// another.
func (h *Hub) Backspace(token string, from Client, to string) error {
	return h.send(h.room(token), &Line{Backspace: true, From: userOf(from)}, to)
}

// send hands l to the device to, here or through its instance, naming
// the receiver in l.
func (h *Hub) send(r *room, l *Line, to string) error {
	r.mu.Lock()
	recv := r.clients[to]
	var far *remote
	if recv == nil { // a client here goes first
		far = r.remote[to]
	}
	r.mu.Unlock()
	switch {
	case recv != nil:
		l.To = User{ID: to, Nickname: recv.Nickname()}
	case far != nil:
		l.To = User{ID: to, Nickname: far.Nickname()}
	default:
		return ErrNoReceiver
	}
	if l.Backspace {
		l.To.Nickname = "" // a backspace names its receiver by ID only
	}
	if far != nil {
		return h.deliver(r, far, *l)
	}
	if !recv.Send(&Note{Kind: NoteLine, Line: l}) {
		return ErrReceiverBusy
	}
	return nil
}
