package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

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

// The outcomes no one waits to hear (a deadline passed, a request
// abandoned by its agent) that could not be saved are tried again, with
// backoff, until they are or the request is settled some other way: a
// deadline fires once, eventually, however long the store is away. An
// agent's own cancel is not: its caller is told and decides.
const (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// retryOutcome arms the next try of p's timeout or withdrawal, which
// failed with serr. The try stands in p's deadline timer, which has
// fired: an outcome that lands stops it.
func (h *Hub) retryOutcome(r *room, p *pending, err error, reason string, serr error) {
	if !errors.Is(err, ErrTimeout) && reason != ReasonAbandoned {
		h.unsaved("outcome not saved: the request stays pending", "kind", p.req.Kind, "id", p.req.ID, "reason", reason, "err", serr)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[p.req.ID] != p {
		return
	}
	p.retry = min(max(2*p.retry, retryFirst), retryMax)
	h.unsaved("outcome not saved: tried again later", "kind", p.req.Kind, "id", p.req.ID, "reason", reason, "in", p.retry, "err", serr)
	stopTimer(&p.expiry)
	p.expiry = time.AfterFunc(p.retry, func() {
		if reason == ReasonAbandoned {
			r.mu.Lock()
			back := r.pending[p.req.ID] != p || p.waiters > 0 || p.holder != h.self
			r.mu.Unlock()
			if back { // its agent came back, here or elsewhere
				return
			}
		}
		try := func() error { return h.settle(r, p, nil, err, reason) }
		if reason == ReasonAbandoned {
			try = func() error { return h.abandon(r, p) }
		}
		if try() == nil {
			h.log.Info("outcome saved after all", "kind", p.req.Kind, "id", p.req.ID, "reason", reason)
		}
	})
}

// PendingIDs lists the requests pending here, every room's, as
// "kind:id" (no token, no text): what a lost store took with it.
func (h *Hub) PendingIDs() []string {
	h.mu.Lock()
	rooms := make([]*room, 0, len(h.rooms))
	for _, r := range h.rooms {
		rooms = append(rooms, r)
	}
	h.mu.Unlock()
	var out []string
	for _, r := range rooms {
		r.mu.Lock()
		for id, p := range r.pending {
			out = append(out, p.req.Kind.String()+":"+id)
		}
		r.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// unsaved tells that the store refused a write (a full disk, NATS out of
// storage): the first refusal of a run at error level, the rest at debug
// level until a write passes (saved). A person trying again and again,
// and a channel's reply tried again, do not flood the log.
func (h *Hub) unsaved(msg string, args ...any) {
	if h.saves.Fail() {
		h.log.Error(msg+"; the store refuses writes: what cannot be saved is refused until it takes them again (told then)", args...)
		h.goProbe()
		return
	}
	h.log.Debug(msg, args...)
}

// Refusing reports whether the store refuses writes now: from the first
// refusal until a write passes, the probe's where the store has one (a
// small write may fit where the next one does not: a file's free pages).
// /health says unhealthy meanwhile.
func (h *Hub) Refusing() bool { return h.saves.Failing() }

// Prober is a store that can try a small write of its own, as the
// records it refused would need (a file grown as far as the database, a
// value put into NATS's file storage), and take it back.
type Prober interface {
	Probe(ctx context.Context) error
}

// probeEvery spaces the probe's writes while the store refuses them.
const probeEvery = time.Second

// goProbe tries the store's probe every probeEvery, on a goroutine the
// hub owns (own), until one passes (the refusals end, told once) or the
// hub closes. Without it, a store that
// takes writes again would be said to refuse them until someone wrote:
// a balancer sends no one to an instance whose /health says so.
func (h *Hub) goProbe() {
	p, ok := h.shared.(Prober)
	if !ok || !h.own("probe", "") {
		return
	}
	go func() {
		defer h.writes.Done()
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for h.saves.Failing() {
			select {
			case <-h.quit:
				return
			case <-t.C:
			}
			ctx, cancel := h.sharedCtx(context.Background())
			err := p.Probe(ctx)
			cancel()
			if err == nil {
				h.savesAgain()
				return
			}
			h.log.Debug("the store's probe write failed", "err", err)
		}
	}()
}

// saved: a write passed, which ends a run of refusals told by unsaved,
// unless the store has a probe: then the probe's write ends it, one
// that needs the room a record may.
func (h *Hub) saved() {
	if _, probes := h.shared.(Prober); !probes {
		h.savesAgain()
	}
}

// savesAgain ends a run of refusals told by unsaved, and tells so.
func (h *Hub) savesAgain() {
	if ok, n, since := h.saves.End(); ok {
		h.log.Info("the store saves again", "refused", n, "for", time.Since(since).Round(time.Second))
	}
}
