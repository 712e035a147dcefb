package relay

// A relay session (channel) lives in Relay.channels while it holds
// something: a host, agents, a study session, calls in flight, queued
// user messages, the grace of a host that left (which keeps its last
// state), or a caller in the middle of using it. Then it is freed, so
// looking a session up, or a peer passing through, costs nothing lasting.
//
// Lock order: Relay.mu before channel.mu.

// acquire returns the relay session of (token, name), made if need be,
// held until release so it is not freed while the caller uses it.
func (r *Relay) acquire(token, name string) *channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acquireLocked(token, name)
}

// acquireLocked is acquire with Relay.mu held.
func (r *Relay) acquireLocked(token, name string) *channel {
	key := token + "\x00" + name
	ch := r.channels[key]
	if ch == nil {
		ch = newChannel(r, token, name)
		ch.key = key
		ch.use = r.useOf(token)
		ch.use.chans++
		r.channels[key] = ch
		ch.mu.Lock()
		r.attachHome(ch)
		ch.mu.Unlock()
	}
	ch.refs++
	return ch
}

// lookup is acquire for a relay session that exists: nil when none does.
func (r *Relay) lookup(token, name string) *channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.channels[token+"\x00"+name]
	if ch != nil {
		ch.refs++
	}
	return ch
}

// release lets go of a relay session from acquire or lookup.
func (r *Relay) release(ch *channel) { r.unhold(ch, 1) }

// tidy frees ch if it holds nothing; called when something has left it.
func (r *Relay) tidy(ch *channel) { r.unhold(ch, 0) }

func (r *Relay) unhold(ch *channel, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch.refs -= n
	ch.mu.Lock()
	idle := ch.idleLocked()
	if idle && r.channels[ch.key] == ch {
		ch.leaveCluster()
		ch.use.state.Add(-ch.held) // what it kept of its host's goes with it
		ch.held = 0
	}
	ch.mu.Unlock()
	if idle && r.channels[ch.key] == ch {
		delete(r.channels, ch.key)
		ch.use.chans--
		if ch.counted {
			ch.use.sessions--
		}
		r.unuse(ch.token, ch.use)
		if len(r.channels) == 0 {
			r.channels = make(map[string]*channel) // maps never shrink
		}
	}
}

// idleLocked reports whether ch holds nothing. Called with both locks.
// One whose host is on another instance holds only its agents and
// callers: the calls in flight are the home's to answer, and its leaving
// tells the home to forget them.
func (ch *channel) idleLocked() bool {
	if ch.away() {
		return ch.refs == 0 && len(ch.agents) == len(ch.proxies)
	}
	return ch.refs == 0 && ch.host == nil && len(ch.agents) == len(ch.proxies) && ch.log == nil &&
		len(ch.inflight) == 0 && len(ch.mailbox) == 0 && ch.hostGone == nil
}

// leaveCluster, as ch is freed, tells the home this instance has no
// agents there any more, or, on a home whose host has gone, lets the
// cluster forget the record. Called with both locks held.
func (ch *channel) leaveCluster() {
	r := ch.r
	if r.o.Cluster == nil {
		return
	}
	if ch.away() {
		_ = r.o.Cluster.Send(ch.home(), ch.token, ch.name, Frame{Kind: FrameLeave, From: r.o.Cluster.Instance()})
		return
	}
	if ch.everHome && ch.host == nil {
		r.homes.put(ch.token, ch.name, Home{Instance: r.o.Cluster.Instance(), Host: ch.lastHost}, true)
	}
}
