package mcphttp

import (
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
// (StatusConflict while it is open). code is 0, or the HTTP status to
// refuse with (StatusGone: closed).
func (h *Handler) enter(token, name, sid, base string, listen *stream, opens bool) (b *bridge, s *session, victim *session, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, http.StatusGone
	}
	key := sha256.Sum256([]byte(token))
	rm := h.rooms[key]
	if rm == nil {
		rm = &room{token: token, bridges: make(map[string]*bridge)}
		h.rooms[key] = rm
	}
	if sid != "" {
		s, _ = rm.sessions.Get(sid)
		if s == nil || s.b.relay != name {
			h.dropIfEmptyLocked(key, rm)
			return nil, nil, nil, http.StatusNotFound
		}
		if listen != nil && !listen.resume && s.listening() {
			// One standalone stream per session, as the official SDK's
			// server allows: each one open holds a connection and its
			// buffers for as long as the client keeps it.
			return nil, nil, nil, http.StatusConflict
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
		return s.b, s, nil, 0
	}
	b = rm.bridges[name]
	if b == nil && len(rm.bridges) >= h.o.MaxSessions {
		return nil, nil, nil, http.StatusServiceUnavailable
	}
	if opens && rm.sessions.Len() >= h.o.MaxSessions {
		var ok bool
		if _, victim, ok = rm.sessions.Oldest(func(c *session) bool { return c.busy == 0 }); !ok {
			return nil, nil, nil, http.StatusServiceUnavailable
		}
		h.forgetLocked(victim)
	}
	if b == nil {
		b = h.newBridge(rm, name, base)
		rm.bridges[name] = b
	}
	b.busy++
	return b, nil, victim, 0
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

// listening reports whether s has its standalone stream open.
func (s *session) listening() bool {
	for st := range s.streams {
		if !st.resume {
			return true
		}
	}
	return false
}

// dropIfEmptyLocked forgets a room that holds nothing.
func (h *Handler) dropIfEmptyLocked(key [sha256.Size]byte, rm *room) {
	if len(rm.bridges) == 0 && rm.sessions.Len() == 0 {
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
	free := h.releaseLocked(b)
	h.mu.Unlock()
	if free {
		h.stopBridge(b)
	}
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
	h.dropIfEmptyLocked(sha256.Sum256([]byte(rm.token)), rm)
	return true
}

// evict ends a session that made way for a new one: the transport
// forgets it as it would on the client's DELETE, and the client's next
// request gets 404.
func (h *Handler) evict(s *session) {
	h.mu.Lock()
	registered := s.registered
	h.mu.Unlock()
	if registered {
		req, _ := http.NewRequestWithContext(h.runs.Context(), http.MethodDelete, "/mcp", http.NoBody)
		req.Header.Set(server.HeaderKeySessionID, s.id)
		s.b.http.ServeHTTP(discard{}, req)
		h.log.Info("an MCP session unused the longest made way for a new one")
	}
	h.mu.Lock()
	free := h.releaseLocked(s.b)
	h.mu.Unlock()
	if free {
		h.stopBridge(s.b)
	}
}

// ids is a bridge's session ID manager: IDs are random (128 bits and
// more), valid while the table holds them, forgotten when they end (a
// forgotten ID gets 404, as the transport specifies for ended sessions).
type ids struct {
	h *Handler
	b *bridge
}

var errUnknownSession = errors.New("unknown session")

func (m ids) Generate() string {
	sid := "mcp-session-" + rand.Text()
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	if !m.b.gone {
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
		m.h.forgetLocked(s)
	}
	return false, nil
}
