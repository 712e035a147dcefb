package hub

import "fmt"

// The link to the cluster's store, as the cluster's probe finds it. While
// it is lost, the agents' calls waiting on this instance end as
// ErrUnreachable (Connect's Unavailable) rather than wait on an instance
// that can save nothing: agentassistant-mcp with several servers goes to
// the next, and re-attaches there by the request's ID. The requests stay
// pending in the store. A caller that cannot come back for a request
// (WithdrawOnLeave: upstream's agentassistant-mcp) keeps waiting here.

// linkDown is closed while the link is lost. linkMu is held alone.
func (h *Hub) linkDown() <-chan struct{} {
	h.linkMu.Lock()
	defer h.linkMu.Unlock()
	if h.down == nil {
		h.down = make(chan struct{})
	}
	return h.down
}

// LinkLost ends the calls waiting here, and those that come, with
// ErrUnreachable until LinkBack.
func (h *Hub) LinkLost() {
	h.linkMu.Lock()
	defer h.linkMu.Unlock()
	if h.down == nil {
		h.down = make(chan struct{})
	}
	select {
	case <-h.down:
	default:
		close(h.down)
	}
}

// LinkBack lets calls wait here again.
func (h *Hub) LinkBack() {
	h.linkMu.Lock()
	defer h.linkMu.Unlock()
	select {
	case <-h.down:
		h.down = make(chan struct{})
	default:
	}
}

// errLinkLost is what a call waiting on an instance that lost its link
// is told.
var errLinkLost = fmt.Errorf("%w: this instance lost its link to NATS; ask another instance", ErrUnreachable)
