package mcphttp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// The session table: which bridge and MCP session a request belongs to,
// a token's sessions bounded, the one unused the longest evicted.

// enter finds the bridge (and the session, for sid) a request goes to and
// counts the request in. A request without a session may make a bridge;
// one that opens a session (opens: an initialize) may take the place of
// the least recently used idle session (victim, to evict) when the room
// is full, a request of the stateless protocol (which opens none) never. A session is idle
// when no request of it is being served but its standalone stream (GET):
// the official SDK keeps one open all along. listen, for a GET, is the
// stream to end if its session is forgotten; a session has one at most
// (StatusConflict while it is open). A signed ID this process does not
// know is adopted (adopt: the caller makes the MCP server know it) as a
// new session is, within the same bounds. code is 0, or the HTTP status
// to refuse with (StatusGone: closed).
func (h *Handler) enter(token, name, sid, base string, listen *stream, opens bool) (b *bridge, s *session, victim *session, adopt bool, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, false, http.StatusGone
	}
	key := sha256.Sum256([]byte(token))
	rm := h.rooms[key]
	if rm == nil {
		rm = &room{key: key, bridges: make(map[string]*bridge)}
		h.rooms[key] = rm
	}
	rm.token = token // the same, or learnt now (peers.go)
	if sid != "" {
		s, _ = rm.sessions.Get(sid)
		if s == nil && h.key != nil {
			if s, victim, code = h.adoptLocked(rm, token, name, sid, base); code != 0 {
				h.dropIfEmptyLocked(key, rm)
				return nil, nil, nil, false, code
			}
			adopt = s != nil
		}
		if s == nil || s.b.relay != name {
			h.dropIfEmptyLocked(key, rm)
			return nil, nil, nil, false, http.StatusNotFound
		}
		if listen != nil && !listen.resume && s.listening() {
			// One standalone stream per session, as the official SDK's
			// server allows: each one open holds a connection and its
			// buffers for as long as the client keeps it.
			return nil, nil, nil, false, http.StatusConflict
		}
		if listen != nil {
			if s.streams == nil {
				s.streams = make(map[*stream]struct{})
			}
			s.streams[listen] = struct{}{}
		} else {
			s.busy++
		}
		rm.sessions.Use(sid)
		s.b.busy++
		return s.b, s, victim, adopt, 0
	}
	b, victim, code = h.roomLocked(rm, name, base, opens)
	if code != 0 {
		return nil, nil, nil, false, code
	}
	b.busy++
	return b, nil, victim, false, 0
}

// roomLocked finds or makes the bridge of relay session name, and, for a
// request that opens a session (opens), makes room for it: the session
// unused the longest makes way (victim, to evict), or the request is
// refused (code) when every one is busy.
func (h *Handler) roomLocked(rm *room, name, base string, opens bool) (b *bridge, victim *session, code int) {
	b = rm.bridges[name]
	if b == nil && len(rm.bridges) >= h.o.MaxSessions {
		return nil, nil, http.StatusServiceUnavailable
	}
	if opens && rm.sessions.Len() >= h.o.MaxSessions {
		var ok bool
		// A session being taken over is in use too, though a stream
		// (GET) alone may be waiting for it: made way for, it would come
		// back as its replayed initialize registers it, past the bound.
		if _, victim, ok = rm.sessions.Oldest(func(c *session) bool { return c.busy == 0 && !c.adopting() }); !ok {
			return nil, nil, http.StatusServiceUnavailable
		}
		h.forgetLocked(victim)
	}
	if b == nil {
		b = h.newBridge(rm, name, base)
		rm.bridges[name] = b
	}
	return b, victim, 0
}

// adoptLocked puts in the table the session of a signed ID another
// instance made, if it is valid for this room and relay session and its
// client did not end it here; s is nil when not (404). It takes a place
// in the table as a new session does.
func (h *Handler) adoptLocked(rm *room, token, name, sid, base string) (s, victim *session, code int) {
	if _, ended := rm.ended.Get(sid); ended {
		return nil, nil, 0
	}
	c, err := verify(h.key, token, sid)
	if err != nil || c.Relay != name {
		return nil, nil, 0
	}
	b, victim, code := h.roomLocked(rm, name, base, true)
	if code != 0 {
		return nil, nil, code
	}
	s = &session{b: b, id: sid, adopted: &c, ready: make(chan struct{})}
	rm.sessions.Put(sid, s)
	b.sessions++
	return s, victim, 0
}

// adopt makes the MCP server know an adopted session: its client's
// initialize, as signed in its ID, is made again under that ID. Then the
// requests waiting for it go on. It reports whether the session is
// served (false: it was forgotten meanwhile, 404).
func (h *Handler) adopt(s *session) bool {
	st := inject(context.WithValue(h.runs.Context(), giveKey{}, s.id), s.b, http.MethodPost, "", s.adopted.initBody())
	h.mu.Lock()
	close(s.ready)
	if st.status != http.StatusOK || !s.registered {
		// Its next request meets the ID anew rather than a session the
		// MCP server does not know.
		h.forgetLocked(s)
		h.mu.Unlock()
		h.log.Warn("an MCP session made by another instance could not be taken over", "status", st.status)
		return false
	}
	if _, ended := s.b.room.ended.Get(s.id); ended {
		// Its client ended it elsewhere meanwhile (peers.go).
		h.mu.Unlock()
		h.end(h.runs.Context(), s, endedElsewhere)
		return false
	}
	h.mu.Unlock()
	h.log.Debug("an MCP session made by another instance taken over")
	return true
}

// forgetLocked takes a session out of the table and ends its streams
// (the transport keeps a stream open for as long as its client does).
func (h *Handler) forgetLocked(s *session) {
	rm := s.b.room
	if cur, _ := rm.sessions.Get(s.id); cur == s {
		rm.sessions.Delete(s.id)
		s.b.sessions--
	}
	for st := range s.streams {
		st.end()
	}
	if s.log != nil {
		s.log.close()
	}
}

// adopting reports whether s is being taken over: its client's
// initialize not yet replayed.
func (s *session) adopting() bool {
	if s.ready == nil {
		return false
	}
	select {
	case <-s.ready:
		return false
	default:
		return true
	}
}

// listening reports whether s has its standalone stream open.
func (s *session) listening() bool {
	for st := range s.streams {
		if !st.resume {
			return true
		}
	}
	return false
}

// dropIfEmptyLocked forgets a room that holds nothing (but the IDs its
// clients ended: a token's few, kept while the process runs).
func (h *Handler) dropIfEmptyLocked(key [sha256.Size]byte, rm *room) {
	if len(rm.bridges) == 0 && rm.sessions.Len() == 0 && rm.ended.Len() == 0 {
		delete(h.rooms, key)
	}
}

// leave counts a request out, and frees its bridge when nothing uses it.
func (h *Handler) leave(b *bridge, s *session, listen *stream) {
	h.mu.Lock()
	switch {
	case s != nil && listen != nil:
		delete(s.streams, listen)
	case s != nil:
		s.busy--
	}
	b.busy--
	h.mu.Unlock()
	h.release(b)
}

// releaseLocked takes b out of its room when it serves nothing and holds
// no session, and reports whether the caller must stop it.
func (h *Handler) releaseLocked(b *bridge) bool {
	if b.gone || b.busy > 0 || b.sessions > 0 || h.closed {
		return false
	}
	b.gone = true
	rm := b.room
	delete(rm.bridges, b.relay)
	h.dropIfEmptyLocked(rm.key, rm)
	return true
}

// release stops b once it serves nothing and holds no session.
func (h *Handler) release(b *bridge) {
	h.mu.Lock()
	free := h.releaseLocked(b)
	h.mu.Unlock()
	if free {
		h.stopBridge(b)
	}
}

// resolver gives the session ID manager of a request to a bridge's
// transport: the request's context says which ID an initialize gives
// (giveKey) and whether a DELETE is the endpoint's own (evictKey).
type resolver struct {
	h *Handler
	b *bridge
}

type (
	giveKey  struct{}
	evictKey struct{}
)

func (r resolver) ResolveSessionIdManager(req *http.Request) server.SessionIdManager {
	m := ids{h: r.h, b: r.b}
	if req != nil {
		m.give, _ = req.Context().Value(giveKey{}).(string)
		m.evicting = req.Context().Value(evictKey{}) != nil
	}
	return m
}

// ids is a bridge's session ID manager: IDs are random (128 bits and
// more), or signed (give), valid while the table holds them, forgotten
// when they end (a forgotten ID gets 404, as the transport specifies for
// ended sessions).
type ids struct {
	h        *Handler
	b        *bridge
	give     string // the ID to give: signed, or adopted
	evicting bool   // the DELETE of a session that makes way
}

var errUnknownSession = errors.New("unknown session")

func (m ids) Generate() string {
	sid := m.give
	if sid == "" {
		sid = "mcp-session-" + rand.Text()
	}
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	if s, _ := m.b.room.sessions.Get(sid); s == nil && !m.b.gone {
		m.b.room.sessions.Put(sid, &session{b: m.b, id: sid})
		m.b.sessions++
	}
	return sid
}

func (m ids) Validate(sid string) (terminated bool, err error) {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	if s, _ := m.b.room.sessions.Get(sid); s == nil || s.b != m.b {
		return false, errUnknownSession
	}
	return false, nil
}

func (m ids) Terminate(sid string) (notAllowed bool, err error) {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	if s, _ := m.b.room.sessions.Get(sid); s != nil && s.b == m.b {
		if m.h.key != nil && !m.evicting {
			m.h.endedLocked(m.b.room, sid)
		}
		m.h.forgetLocked(s)
	}
	return false, nil
}

// endedLocked keeps sid among the IDs the room's clients ended, the
// latest MaxSessions.
func (h *Handler) endedLocked(rm *room, sid string) {
	rm.ended.Put(sid, struct{}{})
	for rm.ended.Len() > h.o.MaxSessions {
		k, _, _ := rm.ended.Oldest(func(struct{}) bool { return true })
		rm.ended.Delete(k)
	}
}
