package mcphttp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// A call's stream resumed through another instance (resume.go) is fed
// there from the request's record: the outcome. What the call where it
// began sends its client meanwhile (progress, a form, the form's
// withdrawal, the response with what the form did) is relayed:
//
//   - The instance that serves the resumed stream (B) tells, at once and
//     every Grace/3 while it serves it, that it carries the stream of
//     request Q of the session, and the last event of the first
//     instance's (A) its client has: a carry.
//   - A, holding the call that asked Q, takes a carry as its client's
//     connection for Grace: the call waits on the request again (so its
//     progress, its form, and its outcome go on), and every event of
//     the call's stream after the one named, then each one it records,
//     goes to B numbered as in A's log. B writes each one once, in A's
//     order (a number not above the last one written is skipped), and a
//     carry renewed names the last one written, so an event lost on the
//     way is sent again. A's response ends B's stream; B's own outcome,
//     when it comes first, waits originWait for A's (which says what the
//     form did) once A has been heard from.
//   - Each event B writes names in its ID, after B's own tag and
//     number, the last of A's events its client then has
//     ("<B's tag>-<n>@<A's tag>-<m>", eventPos). B dead, the client
//     resumes through C from B's last event; C reads A's event from the
//     ID and its carry names it, and A sends C every event after it,
//     those it recorded while no one carried the stream included (its
//     log keeps them; a call done meanwhile too). No word of B's has to
//     reach A for that, so none lost on the way makes A send an event
//     the client has again: the client never has one event twice, nor
//     one ID twice. Through A itself, the client resumes A's own stream
//     after that event; through B again, B's after the last of its
//     events that stands for it.
//   - A JSON-RPC response the client POSTs (its form's answer) is told
//     to the other instances: the one whose log its ID names
//     (formids.go), A, hands it to its MCP server for the session. One
//     whose ID names no log (an instance's before these IDs) each one
//     hands to its MCP server.
//
// What A relays after its call ended for a reason of its own (its
// client's lease lapsed, the instance stopping) is not relayed: B's call
// goes on. A message is at most maxRelay bytes, signed as notes are
// (under a label of its own), names the room by its digest and a
// session ID the cluster signed for it, and acts only on that session's
// streams; they go on core NATS only (Streams), best effort, never
// blocking a call. The goroutine that hears them never blocks on a
// client either: each stream acts on its own on what is relayed for it
// (inbox), so a client that does not read holds up no other.

// Streams carries the relayed events of calls between instances. Peers
// that implement it relay them; others leave a resumed stream with the
// outcome only.
type Streams interface {
	// Send sends msg to the other instances, best effort, without
	// blocking on the network.
	Send(msg []byte)
	// Receive hands hear each message another instance sends, one at a
	// time, in the order each sender sent them, until stop.
	Receive(hear func(msg []byte)) (stop func(), err error)
}

// Origins, which Streams may implement too, tells whether the instance
// where a call began is still there to relay its events: a resumed
// stream whose outcome came waits for that instance's response only
// while it is (awaitOrigin).
type Origins interface {
	// Run names this run of the instance: the event IDs of the calls
	// that begin here carry it (callClaims.Run). A restart is another
	// run: the calls of the one before are not there.
	Run() string
	// Gone reports whether run is known to be gone: no instance hears
	// the relayed events under that name any more. False while it is
	// there, and when that cannot be told before ctx ends.
	Gone(ctx context.Context, run string) bool
}

// relayLabel derives the key of relayed messages from the shared key.
const relayLabel = "agentassistant mcp relay v1"

// maxRelay bounds a relayed message; an event or a response too large
// for it is not relayed.
const maxRelay = 64 << 10

// originWait is how long a resumed stream whose outcome came waits for
// the response of the call where it began, once that call was heard.
const originWait = 2 * time.Second

const (
	relayCarry = "carry" // B carries the stream of Request; Tag-N: the last event of A's its client has
	relayEvent = "event" // A's event N (of its log Tag) of the stream of Request
	relayReply = "reply" // the client's JSON-RPC response, POSTed elsewhere; Tag: the log of the form it answers
)

type relayMsg struct {
	Kind    string          `json:"k"`
	Room    string          `json:"r"`
	Session string          `json:"s"`
	Request string          `json:"q,omitempty"`
	Tag     string          `json:"t,omitempty"`
	N       uint64          `json:"n,omitempty"`
	Data    json.RawMessage `json:"d,omitempty"`
	// Via: an instance of an earlier release named in a carry its own
	// ID of the event; signed with the rest, read no more.
	Via string `json:"v,omitempty"`
	MAC string `json:"m"`
}

// sum is m's signature: over every field.
func (m relayMsg) sum(key []byte) string {
	fields := []string{m.Kind, m.Room, m.Session, m.Request, m.Tag, strconv.FormatUint(m.N, 10), string(m.Data)}
	if m.Via != "" {
		fields = append(fields, m.Via) // one without it is signed as before it was
	}
	return sumFields(key, fields...)
}

// errRelayTooLarge: a message over maxRelay is not relayed.
var errRelayTooLarge = errors.New("too large to relay to the other instances")

// send signs and sends m for the room of token; nothing without Streams.
// It fails only when m is too large to relay.
func (h *Handler) send(token string, m relayMsg) error {
	if h.streams == nil {
		return nil
	}
	m.Room = roomHex(token)
	m.MAC = m.sum(h.relayKey)
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode a relayed message: %w", err)
	}
	if len(b) > maxRelay {
		h.log.Debug("a relayed message too large to send", "kind", m.Kind, "bytes", len(b))
		return errRelayTooLarge
	}
	h.streams.Send(b)
	return nil
}

// received acts on a message another instance relayed. It runs on the
// Streams' goroutine, counted in so that Close waits for it.
func (h *Handler) received(b []byte) {
	if len(b) > maxRelay || !h.runs.Enter() {
		return
	}
	defer h.runs.Exit()
	var m relayMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return
	}
	digest, ok := h.signedBy(m.MAC, m.sum(h.relayKey), m.Room, m.Session)
	if !ok {
		return
	}
	h.mu.Lock()
	var s *session
	if rm := h.rooms[digest]; rm != nil {
		s, _ = rm.sessions.Get(m.Session)
	}
	var l *eventLog
	if s != nil {
		l = s.log
	}
	h.mu.Unlock()
	if s == nil {
		return // this instance serves nothing of the session
	}
	// A carry or an event acts on one stream, under its lock, which a
	// write to its client holds for up to sendTimeout: it is handed to
	// the stream's own goroutine (inbox), so that this one, which hears
	// every session's, never waits on a client. A reply is handed to the
	// MCP server, which gives it to the waiting call without blocking.
	switch m.Kind {
	case relayCarry:
		if st := l.asking(m.Request); st != nil {
			h.handOff(st, m)
		}
	case relayEvent:
		if st := l.resumedOf(m.Request); st != nil && (len(m.Data) == 0 || json.Valid(m.Data)) {
			h.handOff(st, m)
		}
	case relayReply:
		// One that names the log of the form it answers (formids.go) is
		// that instance's alone.
		if json.Valid(m.Data) && (m.Tag == "" || l != nil && l.tag == m.Tag) {
			h.deliverReply(s, m.Data)
		}
	}
}

// inbox is what other instances relayed for one stream and its own
// goroutine has not acted on yet, oldest first. It holds what a carry's
// renewal may send again (mayResendLocked), twice what a session's log
// keeps: at most 2×Replay.Events messages and 2×Replay.Bytes of their
// data (one message, however large, when it is empty); so a client
// that reads gets a carry's whole resend. A client that does not read
// holds its stream's writes for up to sendTimeout each, and a message
// that comes while its inbox is full is dropped: the client has not
// read for as long as the inbox took to fill, and its write fails
// within sendTimeout (the stream is then away, and what comes next is
// kept in the log for its resume). A carry dropped is sent again a
// third of Grace later; an event dropped is lost to this stream
// (progress, which the next one replaces; a form, still answered on
// the person's other devices; the call's response, in whose place the
// stream gives its own outcome after originWait).
type inbox struct {
	mu      sync.Mutex // a leaf: only the handler's owned.Group is called under it
	q       []relayMsg
	bytes   int
	running bool // a goroutine acts on q
	// idle, while one runs, is closed when it ends: for a test, which
	// cannot otherwise tell that a message was acted on and did nothing.
	idle chan struct{}
}

// handOff queues m for st and starts st's goroutine if none runs; it
// never blocks. The goroutine is the handler's (runs): Close waits for
// it.
func (h *Handler) handOff(st *callStream, m relayMsg) {
	in := &st.in
	lim := h.o.Replay
	in.mu.Lock()
	if len(in.q) > 0 && (len(in.q) >= 2*lim.Events || in.bytes+len(m.Data) > 2*lim.Bytes) {
		in.mu.Unlock()
		h.log.Debug("a relayed message dropped: its stream's client does not read", "kind", m.Kind, "request", m.Request)
		return
	}
	defer in.mu.Unlock()
	in.q = append(in.q, m)
	in.bytes += len(m.Data)
	if in.running {
		return
	}
	if !h.runs.Go(func() { h.drain(st) }) {
		in.q, in.bytes = nil, 0 // closing: nothing more is written
		return
	}
	in.running, in.idle = true, make(chan struct{})
}

// drain acts, in order, on what st's inbox holds, until it is empty or
// the handler closes.
func (h *Handler) drain(st *callStream) {
	in := &st.in
	for {
		in.mu.Lock()
		if len(in.q) == 0 || h.runs.Context().Err() != nil {
			in.q, in.bytes, in.running = nil, 0, false
			close(in.idle)
			in.mu.Unlock()
			return
		}
		m := in.q[0]
		in.q[0] = relayMsg{}
		in.q = in.q[1:]
		in.bytes -= len(m.Data)
		in.mu.Unlock()
		switch m.Kind {
		case relayCarry:
			st.carried(m.Tag, m.N)
		case relayEvent:
			st.relayed(m.Tag, m.N, m.Data)
		}
	}
}

// deliverReply hands the client's JSON-RPC response, POSTed through
// another instance, to the MCP server of s: the request it answers may
// be this one's.
func (h *Handler) deliverReply(s *session, body []byte) {
	h.mu.Lock()
	ok := s.registered
	h.mu.Unlock()
	if !ok {
		return
	}
	inject(h.runs.Context(), s.b, http.MethodPost, s.id, body)
}

// carrying tells the other instances, now and every Grace/3 until stop,
// that this one carries st, the resumed stream of request req of
// session sid, and the last event of the call where it began that its
// client has. stop waits for its goroutine.
func (h *Handler) carrying(token, sid, req string, st *callStream) (stop func()) {
	if h.streams == nil {
		return func() {}
	}
	tell := func() {
		st.mu.Lock()
		if st.hearing.IsZero() {
			st.hearing = time.Now()
		}
		m := relayMsg{Kind: relayCarry, Session: sid, Request: req, Tag: st.origin.tag, N: st.origin.n}
		st.mu.Unlock()
		_ = h.send(token, m) // a carry is small
	}
	tell()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(h.o.Replay.Grace/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				tell()
			case <-quit:
				return
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// relayer is what a call's stream where it began needs to relay its
// events: set once the call asks.
type relayer struct {
	h          *Handler
	token, sid string
	request    string
}

// publish relays event n of the stream; nothing once the instance stops.
// An event too large to relay is not: the resumed stream ends with its
// own outcome (awaitOrigin).
func (r *relayer) publish(tag string, n uint64, data []byte) {
	if r.h.runs.Context().Err() != nil {
		return
	}
	_ = r.h.send(r.token, relayMsg{Kind: relayEvent, Session: r.sid, Request: r.request, Tag: tag, N: n, Data: data})
}

// asking is the stream of the call of this session that asked request
// req: the one not yet done, or one done whose events the log still
// keeps (a carrier may still miss some); nil when there is none here.
func (l *eventLog) asking(req string) *callStream {
	if l == nil || req == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for st := range l.streams {
		if st.askedReq == req {
			return st
		}
	}
	for i := len(l.events) - 1; i >= 0; i-- {
		if st := l.events[i].st; st.askedReq == req {
			return st
		}
	}
	return nil
}

// last is the number of the latest event the log gave.
func (l *eventLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// resumedOf is the resumed stream of request req, nil when there is none
// here.
func (l *eventLog) resumedOf(req string) *callStream {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resumed[req]
}

// carried is another instance's word that it carries the stream, whose
// client has its events up to n (tag: this log's; another's, from a
// carrier of an earlier release, names none of them): the call's link
// is up for Grace from now, and what it recorded since is relayed. A
// call done meanwhile (its client away, no carrier heard) relays what
// it recorded since, its response included, for as long as the log
// keeps it.
func (st *callStream) carried(tag string, n uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.expired.Load() {
		return
	}
	if tag == st.log.tag && n > st.log.last() {
		// A number this log never gave (a Last-Event-ID made up by the
		// client): not a carry of this stream.
		return
	}
	// Event 0, no data: the call is here, and its response will say
	// what its form did.
	st.relay.publish(st.log.tag, 0, nil)
	if tag == st.log.tag && n > 0 {
		if from, since, err := st.log.after(st.log.id(n)); err == nil && from == st && st.mayResendLocked(since) {
			for _, e := range since {
				if e.data != nil {
					st.relay.publish(st.log.tag, e.n, e.data)
				}
			}
		}
	}
	if st.done {
		return
	}
	st.leaseGen++
	gen := st.leaseGen
	if st.lease != nil {
		st.lease.Stop()
	}
	st.lease = time.AfterFunc(st.log.lim.Grace, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.leaseGen != gen || !st.remote {
			return
		}
		st.remote = false
		st.changedLocked()
		if st.out == nil && !st.done {
			st.away.Store(true)
			st.expire() // no one carried it for Grace
		}
	})
	if !st.remote {
		st.remote = true
		st.away.Store(false)
		st.changedLocked()
	}
}

// mayResendLocked reports whether events, asked for by a carry, may be
// sent again, and counts them: at most twice the bytes a log keeps
// within a third of the grace (a carry's renewal). A carry is sent each
// time a client resumes the stream, and a client resuming it over and
// over, through instances in turn, must not make this one send its
// whole log each time; twice, so that a stream resumed twice in a row
// is sent all it missed both times. Past it, the next renewal carries
// on from the last event written there. st.mu is held.
func (st *callStream) mayResendLocked(events []event) bool {
	now := time.Now()
	if now.Sub(st.resentFrom) >= st.log.lim.Grace/3 {
		st.resent, st.resentFrom = 0, now
	}
	size := 0
	for _, e := range events {
		size += len(e.data)
	}
	if st.resent+size > 2*st.log.lim.Bytes {
		return false
	}
	st.resent += size
	return true
}

// relayed writes event n of the stream where the call began (tag) on
// this resumed stream, once and in order; that stream's response ends
// this one, and the call here with it.
func (st *callStream) relayed(tag string, n uint64, data []byte) {
	st.mu.Lock()
	defer st.unlockPump()
	if st.done {
		return
	}
	if st.origin.tag != tag {
		if st.heard {
			return // not the stream this one follows
		}
		// Resumed from an ID of an earlier release's carrier, which
		// names none of the call's own events.
		st.origin = eventPos{tag: tag}
	}
	if !st.heard {
		st.heard = true
		close(st.heardCh)
	}
	if n <= st.origin.n || len(data) == 0 {
		return
	}
	st.origin.n = n // the event's ID names it: a client that has it has A's n
	final := responseTo(data, st.call)
	st.recordLocked(data, final)
	if final {
		st.expire()
	}
}

// responseTo reports whether data is the JSON-RPC response to call.
func responseTo(data []byte, call json.RawMessage) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &m) == nil && m.Method == "" && (m.Result != nil || m.Error != nil) && sameID(m.ID, call)
}

// awaitOrigin waits for the response of the call where the stream
// began, which says what the form there did, and comes after that
// call's events: those its client missed come first. Once that call was
// heard from, for at most originWait; before, until it is, for at most
// originWait after this instance first told it carries the stream (an
// outcome that came at once, the call having ended before its client
// resumed, comes before the call's answer to the carry; a call that
// never answers is gone). Not at all when no carry was told, nor once
// gone is closed: the call's instance is gone, nothing more comes from
// it. Reports whether the stream is done.
func (st *callStream) awaitOrigin(gone <-chan struct{}) bool {
	st.mu.Lock()
	heard, heardCh, hearing, over := st.heard, st.heardCh, st.hearing, st.over
	st.mu.Unlock()
	deadline := time.Now().Add(originWait)
	switch {
	case heard:
		heardCh = nil
	case hearing.IsZero():
		return false
	default:
		deadline = hearing.Add(originWait)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		select {
		case <-over:
			return true
		case <-heardCh: // heard now: originWait from now
			heardCh = nil
			t.Reset(originWait)
		case <-t.C:
			return false
		case <-gone:
			return st.isOver()
		}
	}
}

// isOver reports whether the stream is done.
func (st *callStream) isOver() bool {
	select {
	case <-st.over:
		return true
	default:
		return false
	}
}

// serveReply serves the client's JSON-RPC response to a request of the
// server's: the MCP server here takes it when the request is its own;
// else it is relayed to the other instances, one of which sent the
// request (the client is told 202 Accepted, as for one taken here). A
// response too large to relay is refused: 413, and a JSON-RPC error.
func (h *Handler) serveReply(w http.ResponseWriter, r *http.Request, b *bridge, s *session, id json.RawMessage, body []byte) {
	if tag, n, ok := parseFormID(id); ok {
		h.serveFormReply(w, r, b, s, body, tag, n)
		return
	}
	if h.streams == nil {
		b.http.ServeHTTP(w, r)
		return
	}
	c := &captured{h: http.Header{}}
	b.http.ServeHTTP(c, r)
	if c.status/100 == 2 {
		maps.Copy(w.Header(), c.h)
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body.Bytes())
		return
	}
	h.relayReply(w, r, s, "", body)
}

// relayReply passes the client's answer on to the other instances, the
// one whose log is tag alone when tag is set.
func (h *Handler) relayReply(w http.ResponseWriter, r *http.Request, s *session, tag string, body []byte) {
	if err := h.send(h.o.TokenOf(r), relayMsg{Kind: relayReply, Session: s.id, Tag: tag, Data: body}); err != nil {
		// Told 202, the client would take the answer as given while its
		// form waits until it times out: the transport's refusal of a
		// message it cannot take (an HTTP error, a JSON-RPC error with
		// no id), saying why.
		refuse(w, http.StatusRequestEntityTooLarge, invalidRequest, nil, fmt.Sprintf(
			"this answer is over %d KiB, and the request it answers is not this server's: in a cluster an answer is passed to the server that asked only up to %d KiB; send a shorter answer",
			maxRelay>>10, maxRelay>>10))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveFormReply serves the client's answer to request n of the MCP
// server of the session's log tag (formids.go): that server's, here or
// on the instance whose log it is, to which alone it is relayed.
func (h *Handler) serveFormReply(w http.ResponseWriter, r *http.Request, b *bridge, s *session, body []byte, tag string, n int64) {
	body, ok := withID(body, n)
	if !ok {
		refuse(w, http.StatusBadRequest, invalidRequest, nil, "the answer cannot be read")
		return
	}
	h.mu.Lock()
	here := s.log != nil && s.log.tag == tag
	h.mu.Unlock()
	if here {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		b.http.ServeHTTP(w, r)
		return
	}
	if h.streams == nil {
		refuse(w, http.StatusNotFound, invalidRequest, nil,
			"the request this answers is another instance's, and this one cannot pass an answer on: send it to the instance whose stream showed the form")
		return
	}
	h.relayReply(w, r, s, tag, body)
}

// captured is a response kept to look at before it is sent, or the
// response to a request the endpoint makes to itself (inject).
type captured struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.h }

func (c *captured) WriteHeader(code int) {
	c.status = cmp.Or(c.status, code)
}

func (c *captured) Write(p []byte) (int, error) {
	c.status = cmp.Or(c.status, http.StatusOK)
	return c.body.Write(p)
}

func (c *captured) Flush() {}

// run names this instance's run in the claims of its calls; "" without
// Origins.
func (h *Handler) run() string {
	if h.origins == nil {
		return ""
	}
	return h.origins.Run()
}

// awaitOrigin is st.awaitOrigin for a stream whose call began on the
// instance's run named run (callClaims.Run; "" from an earlier release,
// or without Origins: not asked), which ends once that run is known
// gone: a killed instance relays nothing more, and its client is given
// the outcome at once rather than originWait later.
func (h *Handler) awaitOrigin(st *callStream, run string) bool {
	gone, stop := h.watchOrigin(run)
	defer stop()
	return st.awaitOrigin(gone)
}

// originCheck spaces the questions whether a call's instance is still
// there while a resumed stream waits for it: it may die meanwhile.
const originCheck = originWait / 4

// watchOrigin closes gone once run is known gone, asking at once, then
// every originCheck until stop, which waits for its goroutine (the
// handler's: Close ends it too). A nil gone, never closed, when it
// cannot be told.
func (h *Handler) watchOrigin(run string) (gone <-chan struct{}, stop func()) {
	if h.origins == nil || run == "" {
		return nil, func() {}
	}
	ch := make(chan struct{})
	if run == h.origins.Run() {
		// The call began here: it relays nothing to this instance's
		// own streams (Streams hears only the others).
		close(ch)
		return ch, func() {}
	}
	ctx, cancel := context.WithCancel(h.runs.Context())
	ended := make(chan struct{})
	if !h.runs.Go(func() {
		defer close(ended)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// One question at a time, each for up to originCheck: one
			// lost on the way (sent as the run went) is asked again.
			asked := time.Now()
			qctx, qcancel := context.WithTimeout(ctx, originCheck)
			g := h.origins.Gone(qctx, run)
			qcancel()
			if g {
				h.log.Info("the instance where a resumed call began is gone: its outcome is given without waiting for it")
				close(ch)
				return
			}
			t.Reset(time.Until(asked.Add(originCheck)))
		}
	}) {
		cancel()
		return nil, func() {}
	}
	return ch, func() {
		cancel()
		<-ended
	}
}
