package relay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Who is in a relay session: one host, up to maxAgents agents. A host that
// leaves has HostGrace to come back before its study session is ended.

// joinHost makes p the host and acknowledges its relay.join (joinID).
// Registration and acknowledgement happen under one lock: whatever the
// peer, or anyone it tells, does after relay.joined finds it in place, and
// nothing reaches it before relay.joined.
func (ch *channel) joinHost(p Peer, joinID string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if old := ch.host; old != nil && old.instance() != "" {
		// The host was on another instance: this one is newer. That
		// instance fails the calls it had when it sees the claim (claim).
		ch.failInflight("the host was replaced by a newer one before answering; the action may or may not have happened")
	} else if old != nil {
		old.deliver(Envelope{Type: wire.TypeReplaced, Payload: mustJSON(map[string]any{
			"reason": replacedReason(p.hostKind(), ch.name), "by": p.hostKind(),
		})}, nil)
		ch.failInflight("the host was replaced by a newer one before answering; the action may or may not have happened")
		ch.record(studylog.Internal, Envelope{Type: "relay.host.replaced", Payload: json.RawMessage("{}")})
	}
	ch.host = p
	ch.everHome, ch.lastHost, ch.homeOnline, ch.remoteSession = true, p.id(), false, ""
	if ch.hostGone != nil {
		ch.hostGone.Stop() // came back in time: the session goes on
		ch.hostGone = nil
	}
	p.deliver(Envelope{Type: wire.TypeJoined, ReplyTo: joinID, Payload: ch.joinedPayloadLocked("host")}, nil)
	ch.record(studylog.Internal, Envelope{Type: "relay.host.joined", Payload: json.RawMessage("{}")})
	ch.presence()
}

// joinAgent adds p to the agents and acknowledges, as joinHost does.
func (ch *channel) joinAgent(p Peer, joinID string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.agents)-len(ch.proxies) >= maxAgents {
		p.deliver(Envelope{Type: wire.TypeError, ReplyTo: joinID, Payload: mustJSON(errorf(wire.InvalidMessage, "relay session %q has %d agents already", ch.name, maxAgents))}, nil)
		return false
	}
	ch.agents[p] = struct{}{}
	ch.joinHome()
	p.deliver(Envelope{Type: wire.TypeJoined, ReplyTo: joinID, Payload: ch.joinedPayloadLocked("agent")}, nil)
	return true
}

// remove takes p out of the relay session; a host leaving starts the
// grace within which it may come back. A host already replaced is in it
// no more.
func (ch *channel) remove(p Peer) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.host == p {
		ch.host = nil
		ch.failInflight("the host disconnected before answering; the action may or may not have happened")
		ch.record(studylog.Internal, Envelope{Type: "relay.host.left", Payload: json.RawMessage("{}")})
		ch.presence()
		ch.noteHome()
		// For the grace the host may come back (a reload): the study
		// session goes on and the last state stays for the agents.
		ch.hostLeft++
		round := ch.hostLeft
		ch.hostGone = time.AfterFunc(ch.r.o.HostGrace, func() { ch.endForLostHost(round) })
		return
	}
	delete(ch.agents, p)
	ch.forget(p)
}

// leave removes p and frees the relay session if that left it empty.
func (ch *channel) leave(p Peer) {
	ch.remove(p)
	ch.r.tidy(ch)
}

// endForLostHost ends the grace of the host's departure number round:
// the active study session, if any, ends (its log is closed and the
// agents are told), and the relay session is freed if it holds nothing.
func (ch *channel) endForLostHost(round uint64) {
	ch.mu.Lock()
	if round != ch.hostLeft || ch.hostGone == nil {
		ch.mu.Unlock()
		return // the host came back, maybe to leave again
	}
	ch.hostGone = nil
	if ch.host == nil && ch.log != nil {
		env := Envelope{Type: wire.TypeSessionEnded, Payload: mustJSON(map[string]any{
			"sessionId": ch.log.ID(), "logFile": ch.log.RelPath(), "stateReset": true, "reason": "host_gone",
		})}
		ch.record(studylog.Internal, env)
		ch.closeSession()
		ch.toAgents(env, nil)
	}
	ch.mu.Unlock()
	ch.r.tidy(ch)
}

func (ch *channel) presence() {
	ch.toAgents(Envelope{Type: wire.TypePresence, Payload: mustJSON(map[string]any{"host": ch.hostOnline()})}, nil)
}

// toAgents delivers env to every agent but except. It is encoded once for
// the agents on a socket: their send queues share the bytes, so a host's
// big state to many slow agents is held once, not once per agent.
func (ch *channel) toAgents(env Envelope, except Peer) {
	var shared encoded
	for a := range ch.agents {
		if a != except {
			a.deliver(env, &shared)
		}
	}
}

// joinedPayload describes the relay session to a peer that just joined.
func (ch *channel) joinedPayloadLocked(role string) json.RawMessage {
	m := map[string]any{"role": role, "sessionId": ch.name, "hostOnline": ch.hostOnline()}
	if s := ch.activeSession(); s != "" {
		m["activeSession"] = s
	}
	return mustJSON(m)
}

// replacedReason says, to the host a newer one replaced, what took over.
func replacedReason(kind, session string) string {
	switch kind {
	case HostKindPage:
		return "a newer host joined this relay session (another tab of the page, or another mvp-0.2 host)"
	case HostKindAGUI:
		return fmt.Sprintf("an AG-UI frontend on thread %q took over this relay session", session)
	case HostKindIngress:
		return fmt.Sprintf("an Ingress client on session %q took over this relay session", session)
	}
	return "a newer host joined this relay session"
}
