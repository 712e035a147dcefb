package mcphttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// What the instances of a cluster tell each other of the sessions they
// all serve. Behind a balancer without affinity a client's request lands
// on any instance, not always the one that holds what it is about:
//
//   - notifications/cancelled names a call (by its JSON-RPC id) that may
//     be waiting on another instance, where it began or where its cut
//     stream was resumed. The instance that gets it cancels what it holds
//     and tells the others, which hand the same notification to their
//     MCP server under the session's ID, so the call ends as it would
//     on one instance: its request withdrawn, its response saying so.
//   - A DELETE ends the session on the instance that gets it, which
//     tells the others: each forgets its copy as on its own DELETE (its
//     stream ends, a call waiting for its client to resume ends) and
//     refuses the ID from then on, as the room's ended IDs.
//
// A note is small (maxNote), names the room by its digest (never the
// token) and is signed with a key of its own derived from the shared
// key; the session ID it names must be one the cluster signed for that
// room. A note only ever acts on the session it names: a cancel of
// another session's call finds nothing of that call there.

// Peers carries the notes between the instances of a cluster (srv/cluster
// over NATS). nil: one instance.
type Peers interface {
	// Tell sends note to the other instances, best effort: a note lost
	// leaves the instances as they were before notes were told.
	Tell(note []byte)
	// Listen hands hear each note another instance tells, one at a time,
	// until stop is called.
	Listen(hear func(note []byte)) (stop func(), err error)
}

// noteLabel derives the key of notes from the shared key.
const noteLabel = "agentassistant mcp note v1"

// maxNote bounds a note: a signed session ID (maxSignedID), a call's id
// (maxCallID) and the rest.
const maxNote = 4096

// The kinds of note.
const (
	noteCancel = "cancel" // the client cancelled its call Call
	noteEnd    = "end"    // the client ended the session (DELETE)
)

type note struct {
	Kind    string          `json:"k"`
	Room    string          `json:"r"` // hex of the room's digest
	Session string          `json:"s"`
	Call    json.RawMessage `json:"i,omitempty"`
	MAC     string          `json:"m"`
}

// sum is n's signature: over its kind, room, session and call.
func (n note) sum(key []byte) string {
	return sumFields(key, n.Kind, n.Room, n.Session, string(n.Call))
}

// tell tells the other instances of what the client of session sid in
// the room of token did; nothing with one instance.
func (h *Handler) tell(kind, token, sid string, call json.RawMessage) {
	if h.noteKey == nil {
		return
	}
	n := note{Kind: kind, Room: roomHex(token), Session: sid, Call: call}
	n.MAC = n.sum(h.noteKey)
	b, err := json.Marshal(n)
	if err != nil || len(b) > maxNote {
		return // not reached: the session ID and the call's id are bounded before
	}
	h.o.Peers.Tell(b)
	h.log.Debug("told the other instances of an /mcp session", "kind", kind)
}

// heard acts on a note another instance told. It runs on the Peers'
// goroutine, counted in so that Close waits for it.
func (h *Handler) heard(b []byte) {
	if len(b) > maxNote || !h.runs.Enter() {
		return
	}
	defer h.runs.Exit()
	var n note
	if err := json.Unmarshal(b, &n); err != nil {
		h.log.Debug("an unreadable note of another instance", "err", err)
		return
	}
	digest, ok := h.signedBy(n.MAC, n.sum(h.noteKey), n.Room, n.Session)
	if !ok {
		return
	}
	switch n.Kind {
	case noteCancel:
		if len(n.Call) <= maxCallID && validID(n.Call) {
			h.cancelHeard(digest, n.Session, n.Call)
		}
	case noteEnd:
		h.endHeard(digest, n.Session)
	}
}

// cancelHeard cancels call in session sid of room, if this instance
// serves it: as its client's notifications/cancelled would here.
func (h *Handler) cancelHeard(digest [sha256.Size]byte, sid string, call json.RawMessage) {
	h.mu.Lock()
	rm := h.rooms[digest]
	var s *session
	if rm != nil {
		s, _ = rm.sessions.Get(sid)
	}
	if s == nil || !s.registered {
		h.mu.Unlock()
		return // no call of it can be here
	}
	b, l := s.b, s.log
	h.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": string(mcp.MethodNotificationCancelled),
		"params": map[string]any{"requestId": call, "reason": "cancelled through another instance"}})
	inject(h.runs.Context(), b, http.MethodPost, sid, body)
	if l != nil {
		l.cancelResumed(call)
	}
}

// endHeard ends session sid of room, as its client's DELETE would here,
// and keeps it among the room's ended IDs, whether this instance served
// it or not: it is not taken over here later.
func (h *Handler) endHeard(digest [sha256.Size]byte, sid string) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	rm := h.rooms[digest]
	if rm == nil {
		// Its token is learnt when a request of the room comes (enter).
		rm = &room{key: digest, bridges: make(map[string]*bridge)}
		h.rooms[digest] = rm
	}
	h.endedLocked(rm, sid)
	s, _ := rm.sessions.Get(sid)
	h.mu.Unlock()
	if s != nil {
		h.end(h.runs.Context(), s, endedElsewhere)
	}
}

// end forgets session s as its client's DELETE does: the MCP server
// forgets it too, unless it does not know it yet (an adoption in
// progress sees the ID ended once done and ends it then). ctx is the
// DELETE's (an eviction's says so: evictKey); why is logged.
func (h *Handler) end(ctx context.Context, s *session, why string) {
	h.mu.Lock()
	registered := s.registered
	if !registered && !s.adopting() {
		h.forgetLocked(s)
	}
	h.mu.Unlock()
	if registered {
		inject(ctx, s.b, http.MethodDelete, s.id, nil)
		h.log.Info(why)
	}
	h.release(s.b)
}

// endedElsewhere is logged when a session ends through another instance.
const endedElsewhere = "an MCP session ended through another instance"

// cancelID reads the requestId of a notifications/cancelled body, as
// the MCP library reads it (the member of params named exactly so); nil
// when it has none that names a call.
func cancelID(body []byte) json.RawMessage {
	var msg struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return nil
	}
	id := msg.Params["requestId"]
	if len(id) == 0 || len(id) > maxCallID || !validID(id) {
		return nil
	}
	return id
}

// sameID reports whether two JSON-RPC ids, as written, are the same id.
func sameID(a, b json.RawMessage) bool {
	if isString(a) != isString(b) {
		return false
	}
	if isString(a) {
		var x, y string
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x == y
	}
	x, err1 := strconv.ParseInt(string(bytes.TrimSpace(a)), 10, 64)
	y, err2 := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return err1 == nil && err2 == nil && x == y
}
