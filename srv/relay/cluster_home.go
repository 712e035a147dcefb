package relay

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Who is a relay session's home in a cluster, and what follows when it
// moves: the record written by compare-and-set, the host replaced, the
// study session handed over, the instances found dead (cluster.go has the
// frames that cross between the home and the other instances).

// Moved is the cluster telling that the record of (token, session)
// changed (deleted: it is gone). If another instance now holds the host,
// a host here was replaced by a newer one there: it is told and closed,
// its calls fail, its study session goes with it. Agents here follow the
// host to its instance.
func (r *Relay) Moved(token, session string, h Home, deleted bool) {
	if r.o.Cluster == nil {
		return
	}
	me := r.o.Cluster.Instance()
	if !deleted {
		r.alive(h.Instance)
	}
	ch := r.lookup(token, session)
	if ch == nil {
		return
	}
	defer r.release(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if deleted {
		if ch.away() {
			ch.failInflight("the host disconnected before answering; the action may or may not have happened")
			ch.host, ch.homeOnline, ch.remoteSession = nil, false, ""
			ch.presence()
		}
		return
	}
	if h.Instance == me {
		return // our own write
	}
	if ch.away() && ch.home() == h.Instance {
		ch.homeOnline, ch.remoteSession = h.Online, h.Session
		return
	}
	// The host is on another instance now.
	if ch.isHome() {
		ch.host.deliver(Envelope{Type: wire.TypeReplaced, Payload: mustJSON(map[string]any{
			"reason": "a newer host joined this relay session",
		})}, nil)
	}
	if ch.isHome() || ch.everHome {
		ch.failInflight("the host was replaced by a newer one before answering; the action may or may not have happened")
		ch.record(studylog.Internal, Envelope{Type: "relay.host.moved", Payload: mustJSON(map[string]any{"instance": h.Instance})})
		ch.handOver()
		ch.dropProxies()
	} else if ch.away() {
		ch.failInflight("the host was replaced by a newer one before answering; the action may or may not have happened")
	}
	ch.everHome = false
	if ch.hostGone != nil {
		ch.hostGone.Stop()
		ch.hostGone = nil
	}
	ch.host = ch.remotePeer(h.Instance, FrameAgent)
	ch.homeOnline, ch.remoteSession = h.Online, h.Session
	ch.joinHome()
	ch.presence()
}

// joinHome asks the home to send this instance the pushes of the relay
// session, if agents here wait for them. Called with mu held.
func (ch *channel) joinHome() {
	if ch.away() && len(ch.agents) > 0 {
		_ = ch.r.o.Cluster.Send(ch.home(), ch.token, ch.name, Frame{Kind: FrameJoin, From: ch.r.o.Cluster.Instance()})
	}
}

// handOver closes the study log here without ending the study session:
// the new home goes on with it. Called with mu held.
func (ch *channel) handOver() {
	if ch.log == nil {
		return
	}
	if err := ch.log.Close(); err != nil {
		ch.r.log.Error("close study log", "session", ch.log.ID(), "err", err)
	}
	ch.r.log.Info("study session handed over to another instance", "session", ch.log.ID(), "relay", ch.name)
	ch.log = nil
}

// claim records p, which just joined as host here, as the host of ch
// cluster-wide, and takes up the study session its previous home had.
func (r *Relay) claim(ch *channel, p Peer) {
	if r.o.Cluster == nil {
		return
	}
	ch.mu.Lock()
	cur := ch.activeSession()
	ch.mu.Unlock()
	me := r.o.Cluster.Instance()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, err := r.o.Cluster.Claim(ctx, ch.token, ch.name, func(prev Home) Home {
		s := cmp.Or(cur, prev.Session)
		return Home{Instance: me, Host: p.id(), Online: true, Session: s}
	})
	if err != nil {
		r.log.Error("relay host not recorded in the cluster", "relay", ch.name, "err", err)
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.host != p {
		return // replaced meanwhile
	}
	if ch.log == nil && cur == "" && prev.Session != "" && r.o.Logs != nil {
		l, err := r.o.Logs.Resume(ch.token, prev.Session)
		if err != nil {
			r.log.Error("resume study log", "session", prev.Session, "err", err)
			return
		}
		ch.log = l
		ch.record(studylog.Internal, Envelope{Type: "relay.host.moved", Payload: mustJSON(map[string]any{"from": prev.Instance})})
		r.log.Info("study session taken over from another instance", "session", l.ID(), "relay", ch.name, "from", prev.Instance)
		ch.tellHost()
	}
}

// noteHome queues this instance's record of ch for the cluster (the host
// online or not, the study session). Called with mu held, for the home.
func (ch *channel) noteHome() {
	r := ch.r
	if r.o.Cluster == nil || ch.away() || (!ch.isHome() && !ch.everHome) {
		return
	}
	h := Home{Instance: r.o.Cluster.Instance(), Host: ch.lastHost, Online: ch.isHome(), Session: ch.activeSession()}
	r.homes.put(ch.token, ch.name, h, false)
}

// homeWriter writes the homes' records in the background, the latest of
// each relay session, so a relay session's lock is never held over NATS.
type homeWriter struct {
	mu      sync.Mutex
	pending map[[2]string]homeWrite
	wake    owned.Wake
}

type homeWrite struct {
	h      Home
	delete bool
}

func (w *homeWriter) put(token, session string, h Home, del bool) {
	w.mu.Lock()
	if w.pending == nil {
		w.pending = make(map[[2]string]homeWrite)
	}
	w.pending[[2]string{token, session}] = homeWrite{h: h, delete: del}
	w.mu.Unlock()
	w.wake.Tell()
}

func (w *homeWriter) take() map[[2]string]homeWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending
	w.pending = nil
	return p
}

// runCluster is the relay's goroutine in cluster mode: it writes the
// homes' records and, every second, asks the homes of the relay sessions
// followed here whether they are alive.
func (r *Relay) runCluster(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.writeHomes() // a last time: hosts that left at shutdown
			return
		case <-r.homes.wake:
			r.writeHomes()
		case <-t.C:
			r.watchHomes(ctx)
		}
	}
}

func (r *Relay) writeHomes() {
	for k, w := range r.homes.take() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		if w.delete {
			err = r.o.Cluster.Delete(ctx, k[0], k[1], w.h)
		} else {
			err = r.o.Cluster.Update(ctx, k[0], k[1], w.h)
		}
		cancel()
		if err != nil {
			r.log.Warn("relay home not recorded in the cluster", "relay", k[1], "err", err)
		}
	}
}

// watchHomes fails the calls and tells the agents of relay sessions whose
// home instance no longer answers, as if their host had disconnected.
func (r *Relay) watchHomes(ctx context.Context) {
	r.mu.Lock()
	homes := make(map[string][]*channel)
	for _, ch := range r.channels {
		ch.mu.Lock()
		if home := ch.home(); home != "" {
			homes[home] = append(homes[home], ch)
		}
		ch.mu.Unlock()
	}
	r.mu.Unlock()
	for inst, chs := range homes {
		if r.o.Cluster.Alive(ctx, inst) {
			continue
		}
		r.log.Warn("relay host's instance is gone", "instance", inst)
		r.markDead(inst)
		for _, ch := range chs {
			ch.mu.Lock()
			if ch.home() == inst {
				ch.failInflight("the host disconnected before answering; the action may or may not have happened")
				ch.host, ch.homeOnline, ch.remoteSession = nil, false, ""
				ch.presence()
			}
			ch.mu.Unlock()
			r.tidy(ch)
		}
	}
}

func (r *Relay) markDead(inst string) {
	r.deadMu.Lock()
	defer r.deadMu.Unlock()
	if r.dead == nil {
		r.dead = make(map[string]bool)
	}
	r.dead[inst] = true
}

// alive clears a dead mark: the instance wrote a record, so it runs again.
func (r *Relay) alive(inst string) {
	r.deadMu.Lock()
	defer r.deadMu.Unlock()
	delete(r.dead, inst)
}

func (r *Relay) isDead(inst string) bool {
	r.deadMu.Lock()
	defer r.deadMu.Unlock()
	return r.dead[inst]
}
