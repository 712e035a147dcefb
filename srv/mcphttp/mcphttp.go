// Package mcphttp serves MCP over Streamable HTTP at /mcp: the tools of
// agentassistant-mcp (package mcpbridge, the same code), so an MCP client
// can use the server without installing anything. The caller checks the
// token and the Origin first; this package keeps each token's sessions
// apart and bounded.
//
// Each (token, relay session) pair has its own bridge: an MCP server with
// its tools and its Streamable HTTP transport. The bridge calls the
// server's services in process (Options.Backend): the tools are
// agentassistant-mcp's, only the backend differs, and a call crosses no
// second HTTP server and no second pass of the guards.
package mcphttp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentassistant/agentassistant/internal/lru"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Options configure the endpoint. Backend and TokenOf are required.
type Options struct {
	// Backend is the server's services for the calls of a token the
	// caller checked (rpc.Services.Local).
	Backend func(token string) mcpbridge.Backend
	// TokenOf is the token a request presents; the caller has checked it.
	TokenOf func(*http.Request) string
	Logger  *slog.Logger
	// MaxSessions bounds the MCP sessions of one token, and the relay
	// sessions it drives over /mcp at once (default 64). A new session
	// past it takes the place of the one unused the longest (which then
	// gets 404 and starts again, as the transport specifies; its open
	// stream, the GET, does not count as use and is ended); when every
	// one has a request in progress, it is refused with 503.
	MaxSessions int
	// Bridge tunes every bridge (timeouts, progress, host grace, Version);
	// the Backend, Token, RelaySession, ServerURL, Logger, Done, Stopped
	// and Hooks are filled in.
	Bridge mcpbridge.Options
	// Replay bounds what each session keeps so that its clients can
	// resume a call's cut stream, and how long a cut call waits for that.
	Replay ReplayLimits
	// SessionKey, when set, signs the MCP session IDs (signed.go), so
	// that every instance of a cluster serves a session any of them
	// made: the cluster's shared key (32 bytes or more, the same on
	// every instance), from which the key of the IDs is derived. nil:
	// random IDs only this process knows.
	SessionKey []byte
	// Peers, with SessionKey, carries what a client does on one
	// instance to the others that serve its session too: a call's
	// cancel, the session's end (peers.go). nil: the instance ends only
	// what it holds.
	Peers Peers
	// Ended, with SessionKey, keeps the IDs of the sessions clients
	// ended for the process's next run (ended.go): one process's
	// sessions outlive a restart, and an ended one must not. nil: kept
	// in memory only (a cluster's instances learn them through Peers).
	Ended Ended
}

// defaultMaxSessions is MaxSessions' default.
const defaultMaxSessions = 64

// Handler is the /mcp endpoint.
type Handler struct {
	o   Options
	log *slog.Logger
	key []byte // signs the session IDs; nil: random ones
	// evKey signs the requests event IDs carry (eventsig.go); nil with
	// key.
	evKey []byte
	// noteKey signs the notes told to the other instances (peers.go);
	// nil without Peers. unlisten stops hearing theirs.
	noteKey  []byte
	unlisten func()
	// streams relays the events of calls resumed elsewhere (relay.go),
	// signed with relayKey; nil unless Peers carries them. unreceive
	// stops hearing them.
	streams   Streams
	relayKey  []byte
	unreceive func()
	// origins tells whether the instance where a resumed call began is
	// there (relay.go); nil unless Streams tells it.
	origins Origins
	// runs are the bridges' Run; its context ends once Close starts:
	// calls end, bridges stop.
	runs owned.Group

	// mu guards what follows. Lock order: mu is never held while calling
	// into an MCP server or transport (they call back into the session
	// table through their hooks and session ID manager).
	mu     sync.Mutex
	closed bool
	rooms  map[[sha256.Size]byte]*room
}

// room is one token's bridges and sessions.
type room struct {
	key      [sha256.Size]byte         // the token's digest, its key in Handler.rooms
	token    string                    // "" until a request of it comes: a room known only by a note (peers.go)
	bridges  map[string]*bridge        // by relay session
	sessions lru.Map[string, *session] // by MCP session ID
	// ended are the signed IDs of the sessions its clients ended here
	// (DELETE), the latest MaxSessions: not adopted again.
	ended lru.Map[string, struct{}]
}

type bridge struct {
	room     *room
	relay    string
	mcp      *mcpbridge.Server
	http     *server.StreamableHTTPServer
	stop     context.CancelFunc // ends Run
	busy     int                // requests being served
	sessions int                // its entries in room.sessions
	gone     bool               // freed: no longer in room.bridges
}

type session struct {
	b    *bridge
	id   string
	busy int // requests being served, but its streams
	// streams are its standalone streams (GET) open, one at most: they
	// do not make it busy, and end when it is forgotten.
	streams    map[*stream]struct{}
	registered bool // the MCP server knows it (initialize done)
	// writes counts the flushes to the client on all of its streams (see
	// mcpbridge.WithWrites).
	writes atomic.Uint64
	// log keeps its calls' latest events for resuming (nil until its
	// first call).
	log *eventLog
	// adopted: a signed ID another instance made, which this one serves
	// once ready is closed (its initialize replayed to the MCP server);
	// nil for the sessions made here. Set before the session is in the
	// table, never changed.
	adopted *claims
	ready   chan struct{}
}

// New returns the endpoint; Close stops it.
func New(o Options) *Handler {
	opt.Logger(&o.Logger)
	opt.Default(&o.MaxSessions, defaultMaxSessions)
	o.Replay.defaults()
	h := &Handler{o: o, log: o.Logger, rooms: make(map[[sha256.Size]byte]*room)}
	if o.SessionKey != nil {
		h.key = deriveKey(o.SessionKey, sessionIDLabel)
		h.evKey = deriveKey(o.SessionKey, eventIDLabel)
		h.loadEnded()
		if o.Peers != nil {
			h.noteKey = deriveKey(o.SessionKey, noteLabel)
			stop, err := o.Peers.Listen(h.heard)
			if err != nil {
				// Each instance still serves its own; the others' cancels
				// and ends do not reach it.
				h.log.Error("hear the other instances of /mcp sessions", "err", err)
				stop = func() {}
			}
			h.unlisten = stop
			if sp, ok := o.Peers.(Streams); ok {
				h.relayKey = deriveKey(o.SessionKey, relayLabel)
				stop, err := sp.Receive(h.received)
				if err != nil {
					// Resumed streams get the outcome only.
					h.log.Error("hear the events other instances relay of /mcp calls", "err", err)
				} else {
					h.streams, h.unreceive = sp, stop
					h.origins, _ = sp.(Origins)
				}
			}
		}
	}
	return h
}

// Sessions is how many MCP sessions the endpoint holds, of every token:
// at most MaxSessions a token, those of clients that went away without
// closing theirs included, until a newer one takes their place.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, rm := range h.rooms {
		n += rm.sessions.Len()
	}
	return n
}

// DefaultRelaySession is the relay session a URL without ?session= drives.
const DefaultRelaySession = "default"

// ServeHTTP serves one MCP request of an authenticated client. The MCP
// session ID (Mcp-Session-Id) is looked up within the token's room and
// relay session: another token's or relay session's ID is unknown here.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		// Not the 400 of a missing session, nor the 404 by which the
		// transport tells a client its session has ended.
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed: /mcp takes GET, POST and DELETE", http.StatusMethodNotAllowed)
		return
	}
	name := cmp.Or(r.URL.Query().Get("session"), DefaultRelaySession)
	if !relay.ValidSession(name) {
		http.Error(w, "session: "+wire.NameRule, http.StatusBadRequest)
		return
	}
	sid := r.Header.Get(server.HeaderKeySessionID)
	modern := mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
	opens := false // the request opens a session, which may need room
	give := ""     // the signed ID of the session it opens
	if sid == "" && r.Method == http.MethodPost {
		method, id, body, ok := checkBody(w, r)
		if !ok {
			return // refused before a new session is made room for
		}
		if h.key != nil && method == string(mcp.MethodInitialize) && !modern {
			give = sign(h.key, h.o.TokenOf(r), claimsOf(name, body))
		}
		if !modern && method != string(mcp.MethodInitialize) {
			// Not the 404 of a session that ended (the client would
			// initialize again, as if it had had one), and no room made
			// for a session this request does not open.
			refuse(w, http.StatusBadRequest, invalidRequest, id, "Mcp-Session-Id is required: initialize first")
			return
		}
		opens = !modern
	}
	if sid == "" && r.Method != http.MethodPost {
		// A stream (GET) or an end (DELETE) belongs to a session.
		http.Error(w, "Mcp-Session-Id is required: initialize first", http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodGet && !acceptsEventStream(r.Header.Values("Accept")) {
		http.Error(w, "not acceptable: a stream (GET) is text/event-stream, which Accept must list", http.StatusNotAcceptable)
		return
	}
	lastID := ""
	if r.Method == http.MethodGet {
		lastID = r.Header.Get("Last-Event-ID")
	}
	if lastID != "" {
		if modern {
			http.Error(w, "Last-Event-ID: streams are not resumed from protocol 2026-07-28 on", http.StatusBadRequest)
			return
		}
		if _, _, _, err := parseEventID(lastID); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var st *stream
	if r.Method == http.MethodGet {
		st = &stream{end: cancel, resume: lastID != ""}
	}
	if give != "" {
		ctx = context.WithValue(ctx, giveKey{}, give)
	}
	b, s, victim, adopt, code := h.enter(h.o.TokenOf(r), name, sid, baseURL(r), st, opens)
	if victim != nil {
		// It made way for this one: the transport forgets it as it
		// would on its client's DELETE, and its next request gets 404.
		h.end(context.WithValue(h.runs.Context(), evictKey{}, true), victim, "an MCP session unused the longest made way for a new one")
	}
	switch code {
	case http.StatusNotFound:
		http.Error(w, "unknown MCP session: initialize again", code)
		return
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many MCP sessions in use for this token", code)
		return
	case http.StatusConflict:
		http.Error(w, "conflict: this MCP session already has its stream (GET) open; one per session", code)
		return
	case http.StatusGone:
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.leave(b, s, st)
	defer context.AfterFunc(h.runs.Context(), cancel)()
	if adopt && !h.adopt(s) {
		http.Error(w, "unknown MCP session: initialize again", http.StatusNotFound)
		return
	}
	if s != nil && s.ready != nil {
		select { // its adoption, by the request that met it first
		case <-s.ready:
		case <-ctx.Done():
			return
		}
	}
	if !modern {
		// Up to protocol 2025-11-25 a dropped connection is not a cancel
		// (a client cancels with notifications/cancelled): a call whose
		// client went away leaves its question for the project's next
		// call, as agentassistant-mcp does when its client stops it. From
		// 2026-07-28 on, closing the request's stream is the cancel.
		ctx = mcpbridge.WithConnection(ctx, r.Context())
	}
	if s != nil {
		ctx = mcpbridge.WithWrites(ctx, s.writes.Load)
		w = countingWriter{ResponseWriter: w, n: &s.writes}
	}
	if lastID != "" {
		l := h.logOf(s)
		c, sig, from, err := h.elsewhere(l, h.o.TokenOf(r), s.id, lastID)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		case sig != "":
			h.serveResumed(ctx, w, r, b, s, c, sig)
		default:
			l.resume(w, r.WithContext(ctx), from)
		}
		return
	}
	if sid != "" && r.Method == http.MethodPost {
		method, id, body, ok := checkBody(w, r)
		if !ok {
			return // while the body arrives, the session has a request in progress
		}
		if method == string(mcp.MethodInitialize) && !modern {
			// The transport would mint another session for it, outside
			// the table's bound (and, in a cluster, unsigned): refused as
			// the official SDK refuses a second initialize.
			refuse(w, http.StatusBadRequest, invalidRequest, id, "this session is initialized already: an initialize opens a new session, sent without Mcp-Session-Id")
			return
		}
		if method == string(mcp.MethodToolsCall) && string(id) != "null" && !modern && acceptsEventStream(r.Header.Values("Accept")) {
			h.serveCall(ctx, w, r, b, s, id)
			return
		}
		if method == "" && string(id) != "null" && !modern && h.key != nil {
			// A response to a request of the server's (a form's answer):
			// the request may be another instance's.
			h.serveReply(w, r.WithContext(ctx), b, s, id, body)
			return
		}
		if method == string(mcp.MethodNotificationCancelled) && !modern {
			if call := cancelID(body); call != nil {
				// The call may wait elsewhere: where it began, or where
				// its cut stream was resumed (here too, after a restart).
				defer h.cancelled(h.o.TokenOf(r), s, call)
			}
		}
	}
	if r.Method == http.MethodGet && s != nil && h.key != nil {
		// Its forms, and their withdrawals, numbered for the cluster.
		w = formWriter{ResponseWriter: w, log: func() *eventLog { return h.logOf(s) }}
	}
	if r.Method == http.MethodDelete && s != nil {
		h.keepEnded(s)
	}
	b.http.ServeHTTP(w, r.WithContext(ctx))
	if r.Method == http.MethodDelete && s != nil && h.endedHere(s) {
		h.tell(noteEnd, h.o.TokenOf(r), s.id, nil)
	}
}

// cancelled cancels call of session s where the MCP server does not
// hold it (a call resumed here), and tells the other instances.
func (h *Handler) cancelled(token string, s *session, call json.RawMessage) {
	h.mu.Lock()
	l := s.log
	h.mu.Unlock()
	if l != nil {
		l.cancelResumed(call)
	}
	h.tell(noteCancel, token, s.id, call)
}

// endedHere reports whether s's client ended it here: a DELETE the
// transport took.
func (h *Handler) endedHere(s *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ended := s.b.room.ended.Get(s.id)
	return ended
}

// serveCall serves a tool call whose response may be resumed: its stream
// outlives the POST's connection for Replay.Grace, and the call with it.
func (h *Handler) serveCall(ctx context.Context, w http.ResponseWriter, r *http.Request, b *bridge, s *session, id json.RawMessage) {
	// The call's context ends when the stream has been away for Grace,
	// when the session is forgotten while it is away, or when the
	// endpoint closes; not when the POST's connection does.
	cctx, expire := context.WithCancel(context.WithoutCancel(ctx))
	defer expire()
	defer context.AfterFunc(h.runs.Context(), expire)()
	st := h.logOf(s).open(expire, h.signer(r, s))
	k := st.attach(w)
	defer k.finish() // nothing is written to w once this returns
	defer context.AfterFunc(r.Context(), func() { st.detach(k) })()
	cctx = mcpbridge.WithConnection(mcpbridge.WithLink(cctx, st), cctx)
	// The request's ID is chosen here, before the call's first event, so
	// that the stream's event IDs can carry it once the call asks.
	rid := wire.NewID()
	var rel *relayer
	if h.streams != nil {
		rel = &relayer{h: h, token: h.o.TokenOf(r), sid: s.id, request: rid}
	}
	cctx = mcpbridge.WithRequest(cctx, rid, func(kind wire.Kind, sum [32]byte, timeout time.Duration) {
		st.asked(callClaims{Request: rid, Kind: kind, Sum: sum[:], Timeout: int64(timeout / time.Second), Call: id, Run: h.run()}, rel)
	})
	t := &tap{st: st, id: id, captured: captured{h: http.Header{}}, log: h.log, request: rid}
	b.http.ServeHTTP(t, r.WithContext(cctx))
	if t.direct(k) {
		st.end()
		return
	}
	t.begin(k)
	t.finish()
}

// signer signs the requests the event IDs of s's calls carry; nil
// without a shared key.
func (h *Handler) signer(r *http.Request, s *session) func(callClaims) string {
	if h.evKey == nil {
		return nil
	}
	return eventSigner{key: h.evKey, token: h.o.TokenOf(r), sid: s.id}.sign
}

// elsewhere reads a Last-Event-ID of a call's stream that l does not
// keep but another instance's log did (or this one's before a restart,
// or this one's, past ReplayLimits.Age): the claims of the call's
// request, and the signed part of the ID to carry on; sig is "" for an
// ID to resume from l, from (its own; one of another instance's that
// names an event of l's as the last of the call's its client has; or
// one that carries no request: l refuses it), err when its signature
// does not hold for this session.
func (h *Handler) elsewhere(l *eventLog, token, sid, lastID string) (c callClaims, sig, from string, err error) {
	tag, _, origin, sig, err := parseEventIDOrigin(lastID)
	if err != nil {
		return c, "", "", err
	}
	if h.evKey == nil || sig == "" || tag == l.tag && !l.gone(lastID) {
		return c, "", lastID, nil
	}
	if origin.tag == l.tag && origin.n > 0 {
		// The call began here and its client had its event origin.n
		// from another instance: this log's stream goes on after it.
		if own := l.id(origin.n) + "." + sig; !l.gone(own) {
			return c, "", own, nil
		}
	}
	c, err = eventSigner{key: h.evKey, token: token, sid: sid}.verify(sig)
	if err != nil {
		return c, "", "", errEventForeign
	}
	return c, sig, "", nil
}

// serveResumed serves a GET that resumes, through this instance, the
// stream of a call made through another one (or through this one before
// a restart): the call's request is re-attached to through the hub
// (mcpbridge.Server.Resume) and its outcome is the call's response on
// this stream, as the call would have given it. The stream is this
// log's from now on (its events carry the same claims), so a client cut
// again resumes it here, or elsewhere again; like a call's, it outlives
// its connection for Replay.Grace.
func (h *Handler) serveResumed(ctx context.Context, w http.ResponseWriter, r *http.Request, b *bridge, s *session, c callClaims, sig string) {
	cctx, expire := context.WithCancel(context.WithoutCancel(ctx))
	defer expire()
	defer context.AfterFunc(h.runs.Context(), expire)()
	l := h.logOf(s)
	// The call's own end: its client cancelled it (notifications/
	// cancelled, here or on another instance), which withdraws its
	// request, as the MCP server's cancel of a call it runs does.
	callCtx, cancel := context.WithCancel(cctx)
	defer cancel()
	origin, _ := originOf(r.Header.Get("Last-Event-ID")) // read already
	st, fresh := l.openResumed(expire, c.Request, c.Call, cancel, sig, origin)
	if !fresh {
		// Resumed here already: this GET carries that stream now, after
		// the last of its events whose client has nothing of the call
		// where it began past what this one has.
		l.resume(w, r.WithContext(ctx), l.resumeAfter(st, origin))
		return
	}
	k := st.attachResumed(w)
	defer k.finish() // nothing is written to w once this returns
	defer context.AfterFunc(r.Context(), func() { st.detach(k) })()
	callCtx = mcpbridge.WithConnection(mcpbridge.WithLink(callCtx, st), cctx)
	h.log.Info("a call made through another instance resumed here", "kind", c.Kind, "id", c.Request)
	stop := h.carrying(h.o.TokenOf(r), s.id, c.Request, st)
	res := b.mcp.Resume(callCtx, c.Kind, c.Request, c.sum(), c.timeout())
	stop()
	// Its client's own cancel is the call's end, whatever the call where
	// it began saw of it (the request withdrawn); else that call's
	// response, which says what its form did, is the one given.
	if clientCancelled := callCtx.Err() != nil && cctx.Err() == nil; !clientCancelled && h.awaitOrigin(st, c.Run) {
		return // the call where it began gave its response here
	}
	out, err := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      json.RawMessage     `json:"id"`
		Result  *mcp.CallToolResult `json:"result"`
	}{"2.0", c.Call, res})
	if err != nil {
		out = rpcError(c.Call, internalError, "encode the result: "+err.Error())
	}
	st.record(out, true)
}

// logOf is s's event log, made on first use.
func (h *Handler) logOf(s *session) *eventLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.log == nil {
		s.log = newEventLog(h.o.Replay, h.key != nil)
	}
	return s.log
}

// stream is a stream (GET) being served; end ends it. resume: it resumes
// a call's stream (Last-Event-ID), else it is the session's standalone
// stream.
type stream struct {
	end    context.CancelFunc
	resume bool
}

// countingWriter counts a session's flushes: each one has put an event
// of one of its streams on the wire.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Uint64
}

func (c countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	c.n.Add(1)
}

// FlushError flushes as Flush does, and tells when it failed (see
// http.ResponseController).
func (c countingWriter) FlushError() error {
	err := http.NewResponseController(c.ResponseWriter).Flush()
	if err == nil {
		c.n.Add(1)
	}
	return err
}

// Unwrap lets http.ResponseController reach the connection.
func (c countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// baseURL is the server's address as the client reached it, for messages
// that send the person to a page.
func baseURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Close ends the calls in progress (their requests stay pending for the
// next call from the project), closes the sessions and stops the
// bridges. Idempotent.
func (h *Handler) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	var bs []*bridge
	for _, rm := range h.rooms {
		for _, b := range rm.bridges {
			b.gone = true
			bs = append(bs, b)
		}
	}
	h.rooms = nil
	h.mu.Unlock()
	if h.unlisten != nil {
		h.unlisten()
	}
	if h.unreceive != nil {
		h.unreceive()
	}
	h.runs.Stop()
	for _, b := range bs {
		h.stopBridge(b)
	}
	h.runs.Wait()
}

func (h *Handler) stopBridge(b *bridge) {
	b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = b.http.Shutdown(ctx) // ends its listening streams
}

// newBridge makes the MCP server of a token's relay session. Called with
// h.mu held; mcpbridge.New asks the server, in process, once for the web
// UI's tools.
func (h *Handler) newBridge(rm *room, name, base string) *bridge {
	b := &bridge{room: rm, relay: name}
	o := h.o.Bridge
	o.Backend = h.o.Backend(rm.token)
	o.Token, o.RelaySession, o.ServerURL = rm.token, name, base
	o.Logger = h.log.With("relay_session", name)
	o.Done, o.Stopped = h.runs.Done(), "agentassistant-srv stopped"
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) { h.registered(b, cs.SessionID()) })
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) { h.unregistered(b, cs.SessionID()) })
	o.Hooks = hooks
	b.mcp = mcpbridge.New(o)
	b.http = server.NewStreamableHTTPServer(b.mcp.MCPServer,
		server.WithSessionIdManagerResolver(resolver{h: h, b: b}),
		// The Host guard in front of every route checks Host, allowed
		// names included; the transport's own check knows only loopback.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(o.Logger),
		// No heartbeat pings: the bridge numbers its requests to the
		// client itself (see mcpbridge's offerInClient), and pings would
		// take numbers too. The connection has its own keepalive.
	)
	ctx, stop := context.WithCancel(h.runs.Context())
	b.stop = stop
	h.runs.Go(func() { _ = b.mcp.Run(ctx) }) // Close has not begun: enter checked h.closed
	return b
}

// registered marks a session the MCP server now knows. One the table
// dropped meanwhile (it made way for another before its initialize was
// done) comes back: the transport holds it, so the table must too.
func (h *Handler) registered(b *bridge, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rm := b.room
	s, _ := rm.sessions.Get(sid)
	if s == nil && !b.gone {
		s = &session{b: b, id: sid}
		rm.sessions.Put(sid, s)
		b.sessions++
	}
	if s != nil {
		s.registered = true
	}
}

// unregistered drops a session the MCP server forgot (DELETE, eviction).
func (h *Handler) unregistered(b *bridge, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, _ := b.room.sessions.Get(sid); s != nil && s.b == b {
		h.forgetLocked(s)
	}
}

// inject serves b's MCP server a request the endpoint makes itself for
// session sid ("" for none: an adopted session's initialize), as its
// client would send it: a JSON-RPC body, or none (nil, a DELETE). It
// gives what the server answered.
func inject(ctx context.Context, b *bridge, method, sid string, body []byte) *captured {
	var r io.Reader = http.NoBody
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, "/mcp", r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if sid != "" {
		req.Header.Set(server.HeaderKeySessionID, sid)
	}
	c := &captured{h: http.Header{}}
	b.http.ServeHTTP(c, req)
	return c
}

// acceptsEventStream reports whether an Accept header takes
// text/event-stream: a media range that names it, text/* or */*, not
// refused with q=0. No header takes anything (RFC 9110).
func acceptsEventStream(accept []string) bool {
	if len(accept) == 0 {
		return true
	}
	// The most specific range that matches says (RFC 9110, 12.5.1):
	// "text/event-stream;q=0, */*" refuses a stream.
	specific, ok := 0, false
	for _, v := range accept {
		for r := range strings.SplitSeq(v, ",") {
			typ, params, _ := strings.Cut(r, ";")
			if level := eventStreamMatch(typ); level > specific {
				specific, ok = level, !refused(params)
			}
		}
	}
	return ok
}

// eventStreamMatch is how specifically a media range names
// text/event-stream: 3 itself, 2 text/*, 1 */*, 0 not at all.
func eventStreamMatch(typ string) int {
	switch strings.ToLower(strings.TrimSpace(typ)) {
	case "text/event-stream":
		return 3
	case "text/*":
		return 2
	case "*/*":
		return 1
	}
	return 0
}

// refused reports whether a media range's parameters give it q=0.
func refused(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}
