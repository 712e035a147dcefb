package mcphttp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
)

// Resumability (the transport's "Resumability and Redelivery", protocol
// 2025-06-18 and 2025-11-25): a tool call's response is a stream (SSE)
// whose events carry IDs, beginning with an event that holds only one,
// so a client whose stream is cut (a proxy's idle timeout, a network
// blip) can resume it with a GET and Last-Event-ID and be sent what it
// missed. The call outlives its connection for Replay.Grace; meanwhile
// it does not wait on the server (mcpbridge.WithLink), so an answer given
// while no one hears is kept there, not taken.
//
// The transport's own event store keeps every event of a session for as
// long as the session lives; this one keeps a session's last few, for a
// while (ReplayLimits), and a call's stream is written here rather than
// there: mcp-go writes its response to a tap that records each event.

// ReplayLimits bound what a session keeps for its clients to resume.
type ReplayLimits struct {
	// Events is how many of a session's latest events are kept (default
	// 64), Bytes how many bytes of them at most (default 1 MiB; a larger
	// event is sent without an ID and cannot be resumed past), and Age
	// how long each is kept at most (default 10 minutes).
	Events int
	Bytes  int
	Age    time.Duration
	// Grace is how long a call whose stream was cut waits for its client
	// to resume before it ends as it would when its connection ends: the
	// request stays pending for the project's next call (default 1
	// minute).
	Grace time.Duration
}

func (l *ReplayLimits) defaults() {
	opt.Default(&l.Events, 64)
	opt.Default(&l.Bytes, 1<<20)
	opt.Default(&l.Age, 10*time.Minute)
	opt.Default(&l.Grace, time.Minute)
}

// maxEventID bounds a Last-Event-ID read: ours are shorter, the claims
// of a call's request included (eventsig.go).
const maxEventID = 512

// sendTimeout bounds one event's write to a client, so a stalled client
// holds a stream for no longer.
const sendTimeout = 30 * time.Second

// Why a Last-Event-ID replays nothing. All of them are 400 Bad Request:
// the session (Mcp-Session-Id) is known; the ID is not one to resume.
var (
	errEventMalformed = errors.New("Last-Event-ID is not an event ID this server gives")
	errEventForeign   = errors.New("Last-Event-ID is not an event of this MCP session")
	errEventGone      = errors.New("Last-Event-ID is no longer kept (a session keeps its latest events for a while); the call's stream cannot be resumed")
	errEventGap       = errors.New("an event after Last-Event-ID was too large to keep; the call's stream cannot be resumed")
	// In a cluster an event ID of another log may be another instance's:
	// one that carries no request (a call that asks no one) is resumed
	// only there.
	errEventElsewhere = errors.New("Last-Event-ID is not an event this instance keeps: in a cluster only a question's or a task report's stream is resumed through any instance; this call's is resumed only through the instance that serves it")
)

// eventLog is one session's latest events of its calls' streams. Lock
// order: a stream's mu before the log's mu; the log's mu is never held
// while calling out.
type eventLog struct {
	lim ReplayLimits
	// tag begins every event ID of the session, so an ID of another
	// session is told apart from one no longer kept.
	tag string
	// cluster: the session may be served by other instances too, whose
	// logs have their own tags.
	cluster bool

	mu      sync.Mutex
	closed  bool // the session is forgotten
	next    uint64
	events  []event // oldest first, numbers ascending
	bytes   int
	streams map[*callStream]struct{} // not yet done
	// resumed are the streams not yet done of the calls made elsewhere
	// and resumed here, by their request's ID: one per request.
	resumed map[string]*callStream
}

type event struct {
	n    uint64
	st   *callStream
	data []byte // nil: the event that opens a stream, an ID only
	at   time.Time
	// origin, of an event of a stream resumed here, is the last event
	// of the call's stream where it began that a client holding this
	// one has: its ID says so (eventPos.String), so that any instance
	// a client resumes through goes on from there.
	origin eventPos
}

// eventPos is an event of a log: its tag and number.
type eventPos struct {
	tag string
	n   uint64
}

func (p eventPos) String() string {
	if p.tag == "" {
		return ""
	}
	return "@" + p.tag + "-" + strconv.FormatUint(p.n, 10)
}

func newEventLog(lim ReplayLimits, cluster bool) *eventLog {
	return &eventLog{lim: lim, tag: strings.ToLower(rand.Text()[:10]), cluster: cluster, streams: make(map[*callStream]struct{}), resumed: make(map[string]*callStream)}
}

func (l *eventLog) id(n uint64) string { return l.tag + "-" + strconv.FormatUint(n, 10) }

// add keeps data as the next event of st and gives its number; 0 when
// it is too large to keep (st then has a gap).
func (l *eventLog) add(st *callStream, data []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addLocked(st, data)
}

func (l *eventLog) addLocked(st *callStream, data []byte) uint64 {
	now := time.Now()
	l.expireLocked(now)
	if len(data) > l.lim.Bytes {
		st.gap, st.gapAfter = true, l.next
		return 0
	}
	l.next++
	l.events = append(l.events, event{n: l.next, st: st, data: data, at: now, origin: st.origin})
	l.bytes += len(data)
	for len(l.events) > l.lim.Events || l.bytes > l.lim.Bytes {
		l.dropLocked()
	}
	return l.next
}

func (l *eventLog) dropLocked() {
	l.bytes -= len(l.events[0].data)
	l.events[0] = event{}
	l.events = l.events[1:]
}

func (l *eventLog) expireLocked(now time.Time) {
	for len(l.events) > 0 && now.Sub(l.events[0].at) > l.lim.Age {
		l.dropLocked()
	}
}

// parseEventID reads an ID this server gives: the session's tag, a
// number, and the signed claims of the call's request when it carries
// them (sig, eventsig.go), unchecked. An ID of a stream resumed through
// another instance than the one where its call began also names the
// last of that call's events its client has (originOf). Any other ID is
// malformed, its tags not as newEventLog makes them or its numbers not
// as written included: the origin an ID names goes to the other
// instances and into the IDs of the events sent after it.
func parseEventID(id string) (tag string, n uint64, sig string, err error) {
	tag, n, _, sig, err = parseEventIDOrigin(id)
	return tag, n, sig, err
}

func parseEventIDOrigin(id string) (tag string, n uint64, origin eventPos, sig string, err error) {
	if len(id) > maxEventID {
		return "", 0, origin, "", errEventMalformed
	}
	head, sig, signed := strings.Cut(id, ".")
	if signed && sig == "" {
		return "", 0, origin, "", errEventMalformed
	}
	head, org, hasOrigin := strings.Cut(head, "@")
	tag, n, ok := parsePos(head)
	if !ok {
		return "", 0, origin, "", errEventMalformed
	}
	if hasOrigin {
		// Its number may be 0: the client has none of them yet.
		otag, onum, ok := strings.Cut(org, "-")
		on, err := strconv.ParseUint(onum, 10, 64)
		if !ok || !validTag(otag) || err != nil || strconv.FormatUint(on, 10) != onum {
			return "", 0, origin, "", errEventMalformed
		}
		origin = eventPos{tag: otag, n: on}
	}
	return tag, n, origin, sig, nil
}

func parsePos(s string) (tag string, n uint64, ok bool) {
	tag, num, ok := strings.Cut(s, "-")
	if !ok || !validTag(tag) {
		return "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != num {
		return "", 0, false
	}
	return tag, n, true
}

// originOf is the last event of the call's stream where it began that a
// client holding event id has: the one id names, else id itself.
func originOf(id string) (eventPos, error) {
	tag, n, origin, _, err := parseEventIDOrigin(id)
	if err != nil {
		return eventPos{}, err
	}
	if origin.tag == "" {
		origin = eventPos{tag: tag, n: n}
	}
	return origin, nil
}

// after finds the event id and gives its stream and the events of that
// stream after it, as (ID, data) pairs.
func (l *eventLog) after(id string) (*callStream, []event, error) {
	tag, n, _, err := parseEventID(id)
	if err != nil {
		return nil, nil, err
	}
	if tag != l.tag {
		return nil, nil, errEventForeign
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(time.Now())
	i := sort.Search(len(l.events), func(i int) bool { return l.events[i].n >= n })
	if i == len(l.events) || l.events[i].n != n {
		if n > l.next {
			return nil, nil, errEventForeign // never given
		}
		return nil, nil, errEventGone
	}
	st := l.events[i].st
	if st.gap && st.gapAfter >= n {
		return nil, nil, errEventGap
	}
	var out []event
	for _, e := range l.events[i+1:] {
		if e.st == st {
			out = append(out, e)
		}
	}
	return st, out, nil
}

// close ends the session's calls: it is forgotten (its client ended it,
// here or elsewhere), so nothing can resume them, and a call whose
// client is there ends too, its question kept for the project's next
// call, as when the client goes away.
func (l *eventLog) close() {
	l.mu.Lock()
	l.closed = true
	sts := make([]*callStream, 0, len(l.streams))
	for st := range l.streams {
		sts = append(sts, st)
	}
	l.mu.Unlock()
	for _, st := range sts {
		st.expire()
	}
}

// callStream is one call's response stream: it outlives the connections
// that carry it (the POST's, then the GETs that resume it), one at a
// time. It is the call's mcpbridge.Link.
type callStream struct {
	log    *eventLog
	expire context.CancelFunc // ends the call
	away   atomic.Bool        // no connection carries it (out == nil)

	mu      sync.Mutex // guards what follows; taken before log.mu
	out     *sink
	done    bool          // its last event is recorded: nothing more comes
	changed chan struct{} // closed and replaced when out changes
	gen     uint64        // counts the changes of out, for the grace timer
	timer   *time.Timer   // ends the call once it has been away for Grace
	prime   *time.Timer   // begins the POST's response as the stream (attach)
	first   uint64        // the number of the stream's first event, which has no data
	// sign signs the claims of the call's request (nil: IDs carry none,
	// one instance); sig, once the call asks, ends every event ID sent
	// since (eventsig.go).
	sign func(callClaims) string
	sig  string
	// request: the ID of the request of a call made elsewhere and
	// resumed here (log.resumed); call, its JSON-RPC id, and cancel, what
	// its client's cancel does to it. Set before the stream is shared.
	request string
	call    json.RawMessage
	cancel  context.CancelFunc

	// over is closed once the stream is done.
	over chan struct{}
	// expired: the call was ended for a reason of this instance's (its
	// client away for Grace, the session forgotten): what it records
	// since is not relayed.
	expired atomic.Bool
	// relay, of a call that asked here, relays its events to the
	// instance that carries its stream (relay.go); set once it asks.
	// remote: one does, until lease, renewed by each carry, fires.
	relay    *relayer
	remote   bool
	lease    *time.Timer
	leaseGen uint64
	// resent counts the bytes of events sent again for carries since
	// resentFrom (mayResendLocked).
	resent     int
	resentFrom time.Time
	// origin, of a stream resumed here: the last event of the call's
	// stream where it began that its client has (each event recorded
	// here names it in its ID); firstOrigin, that of its first event;
	// heard once that call was heard from.
	origin      eventPos
	firstOrigin eventPos
	heard       bool
	// hearing: when this instance first told it carries the stream (zero:
	// it does not, without Streams); heardCh is closed once heard.
	hearing time.Time
	heardCh chan struct{}
	// in: what other instances relayed for it, not yet acted on
	// (relay.go); its own lock.
	in inbox
	// askedReq is the request the call asked here (relay's), kept with
	// the log's events after the stream is done. Guarded by log.mu.
	askedReq string

	// pumps are the connections written to since the lock was taken,
	// written once it is let go (unlockPump).
	pumps []*sink

	// gap: an event after the one numbered gapAfter was too large to
	// keep. Guarded by log.mu.
	gap      bool
	gapAfter uint64
}

func (l *eventLog) open(expire context.CancelFunc, sign func(callClaims) string) *callStream {
	st := &callStream{log: l, changed: make(chan struct{}), sign: sign, over: make(chan struct{})}
	st.expire = func() {
		st.expired.Store(true)
		expire()
	}
	st.away.Store(true)
	l.mu.Lock()
	l.streams[st] = struct{}{}
	l.mu.Unlock()
	return st
}

// openResumed is the stream of a call made elsewhere whose request is
// req, resumed here: the one there is (fresh false), or a new one whose
// call expire ends, its events signed as sig (the call's claims, as the
// Last-Event-ID carried them). One per request, so that resuming a call
// many times waits on its request once. Its first event is in the log
// before another resume can find it, to take it over from there.
func (l *eventLog) openResumed(expire context.CancelFunc, req string, call json.RawMessage, cancel context.CancelFunc, sig string, origin eventPos) (st *callStream, fresh bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.resumed[req]; st != nil {
		return st, false
	}
	st = &callStream{log: l, expire: expire, changed: make(chan struct{}), request: req, call: call, cancel: cancel, over: make(chan struct{}), sig: sig,
		origin: origin, firstOrigin: origin, heardCh: make(chan struct{})}
	st.first = l.addLocked(st, nil)
	st.away.Store(true)
	l.streams[st] = struct{}{}
	l.resumed[req] = st
	return st, true
}

// cancelResumed cancels the calls resumed here whose JSON-RPC id is
// call (the MCP server knows nothing of them: they are not its requests).
func (l *eventLog) cancelResumed(call json.RawMessage) {
	l.mu.Lock()
	var cs []context.CancelFunc
	for _, st := range l.resumed {
		if sameID(st.call, call) {
			cs = append(cs, st.cancel)
		}
	}
	l.mu.Unlock()
	for _, c := range cs {
		c()
	}
}

// resumeAfter is the ID, in this log, of the last event of st whose
// client has no event of the call where it began past origin: where a
// client that holds origin (through another instance) resumes st. Its
// first event when there is none.
func (l *eventLog) resumeAfter(st *callStream, origin eventPos) string {
	st.mu.Lock()
	n := st.first
	st.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.st == st && e.n > n && e.origin.tag == origin.tag && e.origin.n <= origin.n {
			n = e.n
		}
	}
	return l.id(n)
}

// gone reports whether id is an event of this log no longer kept.
func (l *eventLog) gone(id string) bool {
	_, _, err := l.after(id)
	return errors.Is(err, errEventGone)
}

// idLocked is the ID of the stream's event numbered n, whose client has
// the events up to origin of the call where it began (none: it began
// here), as it is sent now.
func (st *callStream) idLocked(n uint64, origin eventPos) string {
	if n == 0 {
		return "" // too large to keep: sent without an ID
	}
	id := st.log.id(n) + origin.String()
	if st.sig != "" {
		return id + "." + st.sig
	}
	return id
}

// asked is the bridge's word that the call asks the person (c without
// its JSON-RPC id, which the stream knows): from now on the stream's
// event IDs carry c, signed, so that any instance can resume it. A
// stream begun already, or away, gets an event with such an ID and no
// data (a resume replays it), so its client has one.
func (st *callStream) asked(c callClaims, r *relayer) {
	if st.sign == nil {
		return
	}
	sig := st.sign(c)
	st.mu.Lock()
	defer st.unlockPump()
	if sig == "" || st.done {
		return
	}
	st.sig = sig
	st.relay = r
	if r != nil {
		st.log.mu.Lock()
		st.askedReq = r.request
		st.log.mu.Unlock()
	}
	if st.out == nil || st.out.started {
		st.recordLocked(nil, false)
	}
}

// State is the mcpbridge.Link: whether a connection carries the stream.
func (st *callStream) State() (bool, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.out != nil || st.remote, st.changed
}

// attachLocked makes k the stream's connection, in place of the one
// before (which ends: the client has moved on).
func (st *callStream) attachLocked(k *sink) {
	if st.out != nil {
		close(st.out.gone)
	}
	st.out = k
	st.away.Store(false)
	st.changedLocked()
}

// detachLocked takes the stream's connection away; a call not done then
// waits Grace for its client to resume.
func (st *callStream) detachLocked() {
	if st.out == nil {
		return
	}
	close(st.out.gone)
	st.out = nil
	st.away.Store(!st.remote)
	st.changedLocked()
	if st.done || st.remote {
		return // another instance carries it: its lease says how long
	}
	st.log.mu.Lock()
	closed := st.log.closed
	st.log.mu.Unlock()
	if closed {
		st.expire()
		return
	}
	gen := st.gen
	st.timer = time.AfterFunc(st.log.lim.Grace, func() {
		st.mu.Lock()
		still := st.gen == gen
		st.mu.Unlock()
		if still {
			st.expire()
		}
	})
}

func (st *callStream) changedLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
	st.gen++
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
}

// detach takes k away, if it is still the stream's connection.
func (st *callStream) detach(k *sink) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.out == k {
		st.detachLocked()
	}
}

// record keeps data as the stream's next event and sends it to the
// connection there is; last ends the stream after it.
func (st *callStream) record(data []byte, last bool) {
	st.mu.Lock()
	defer st.unlockPump()
	st.recordLocked(data, last)
}

// pumpLocked has k written to once the stream's lock is let go.
func (st *callStream) pumpLocked(k *sink) {
	if !slices.Contains(st.pumps, k) {
		st.pumps = append(st.pumps, k)
	}
}

// unlockPump lets the stream's lock go, then writes what was queued
// meanwhile to its connections: a client that does not read holds up
// this goroutine, not the stream. One whose write fails is taken away.
func (st *callStream) unlockPump() {
	ks := st.pumps
	st.pumps = nil
	st.mu.Unlock()
	for _, k := range ks {
		if err := k.pump(); err != nil {
			st.detach(k)
		}
	}
}

func (st *callStream) recordLocked(data []byte, last bool) uint64 {
	if st.done {
		return 0
	}
	n := st.log.add(st, data)
	id := st.idLocked(n, st.origin)
	if st.remote && st.relay != nil && n != 0 && data != nil && !st.expired.Load() {
		st.relay.publish(st.log.tag, n, data)
	}
	if st.out != nil && st.out.started {
		st.out.send(id, data)
		st.pumpLocked(st.out)
	}
	if last {
		st.endLocked()
	}
	return n
}

// end ends the stream: nothing more comes, its connection ends.
func (st *callStream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.endLocked()
}

func (st *callStream) endLocked() {
	if st.done {
		return
	}
	st.done = true
	close(st.over)
	if st.prime != nil {
		st.prime.Stop()
	}
	if st.lease != nil {
		st.lease.Stop()
	}
	st.detachLocked()
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	st.log.mu.Lock()
	delete(st.log.streams, st)
	if st.request != "" && st.log.resumed[st.request] == st {
		delete(st.log.resumed, st.request)
	}
	st.log.mu.Unlock()
}

// attach makes the POST's connection the stream's, its response not yet
// begun: a call answered within primeAfter (most that need no person) is
// answered as mcp-go answers it (direct), one that takes longer becomes
// an event stream (begin) whose first event has an ID only, so the
// client can resume the stream however early it is cut after that.
func (st *callStream) attach(w http.ResponseWriter) *sink {
	k := newSink(w)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.attachLocked(k)
	st.first = st.log.add(st, nil)
	st.prime = time.AfterFunc(primeAfter, func() {
		st.mu.Lock()
		defer st.unlockPump()
		if st.out == k && !k.started {
			st.beginLocked(k)
		}
	})
	return k
}

// attachResumed makes w, a GET that resumes here a call made through
// another instance, the stream's connection. The response begins at once
// with the stream's first event, of this log (an ID only), so that the
// client resumes here next.
func (st *callStream) attachResumed(w http.ResponseWriter) *sink {
	k := newSink(w)
	k.started = true
	st.mu.Lock()
	defer st.unlockPump()
	st.attachLocked(k)
	st.sendLocked(k, frame{event: true, id: st.idLocked(st.first, st.firstOrigin)}, nil)
	return k
}

// primeAfter is how long a call's response waits before it becomes an
// event stream.
const primeAfter = 20 * time.Millisecond

// beginLocked begins k's response as the stream: its first event (ID
// only), then what was recorded since.
func (st *callStream) beginLocked(k *sink) {
	k.started = true
	_, since, err := st.log.after(st.log.id(st.first))
	if err != nil {
		st.sendLocked(k, frame{}, nil)
		return
	}
	st.sendLocked(k, frame{event: true, id: st.idLocked(st.first, st.firstOrigin)}, since)
}

// sendLocked queues, to be written to k once the stream's lock is let
// go, its response's header with head (the stream's first event, or
// nothing), then events, flushed after the last; each written by
// head.until when it is set.
func (st *callStream) sendLocked(k *sink, head frame, events []event) {
	head.header = streamHeader()
	fs := []frame{head}
	for _, e := range events {
		fs = append(fs, frame{event: true, id: st.idLocked(e.n, e.origin), data: e.data, until: head.until})
	}
	fs[len(fs)-1].flush = true
	k.queue(fs...)
	st.pumpLocked(k)
}

// resume serves a GET that resumes the stream after lastID: the events
// the client missed, then the rest as it comes, until the stream ends,
// the client goes or resumes it again elsewhere.
func (l *eventLog) resume(w http.ResponseWriter, r *http.Request, lastID string) {
	st, _, err := l.after(lastID)
	if err != nil {
		if tag, _, _, perr := parseEventID(lastID); l.cluster && perr == nil && tag != l.tag {
			err = errEventElsewhere
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st.mu.Lock()
	_, missed, err := l.after(lastID) // again, now that nothing is recorded meanwhile
	if err != nil {
		st.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// What the client missed is queued before anything recorded later,
	// and written with the stream's lock let go.
	k := newSink(w)
	k.started = true
	defer k.finish()
	// The whole replay gets one sendTimeout: a client that reads it a
	// byte at a time holds its request for no longer.
	// With none, the header flushed tells the client it is back.
	st.sendLocked(k, frame{until: time.Now().Add(sendTimeout)}, missed)
	if st.done {
		st.unlockPump()
		return
	}
	st.attachLocked(k)
	st.unlockPump()
	select {
	case <-k.gone:
	case <-r.Context().Done():
		st.detach(k)
	}
}
