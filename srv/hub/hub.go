// Package hub keeps the token rooms: the /ws clients logged in under each
// token, the requests waiting for a person, and who answered what.
//
// The hub starts no goroutines. A request's waiting belongs to the caller of
// Ask (the RPC handler), a client's sending belongs to its connection.
package hub

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Client is one logged-in /ws connection as the hub sees it.
type Client interface {
	ID() string
	Nickname() string
	ConnectedAt() time.Time
	// Send queues an encoded WebsocketMessage without blocking. A client
	// that cannot keep up is dropped by its connection, not waited for.
	Send(frame []byte) bool
}

// Kind tells the two request kinds apart.
type Kind int

const (
	AskQuestion Kind = iota + 1
	TaskFinish
)

// String is the kind's name on the wire ("AskQuestion", "TaskFinish").
func (k Kind) String() string {
	switch k {
	case AskQuestion:
		return "AskQuestion"
	case TaskFinish:
		return "TaskFinish"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Request is what an agent asks a person: a question or a task report.
type Request struct {
	Kind             Kind
	ID               string
	ProjectDirectory string
	// Text is the question or the summary, markdown.
	Text    string
	Timeout time.Duration
	// Who asks, when the agent says: the agent (e.g. Cursor), the model it
	// runs and the MCP client's name. Shown to the person.
	AgentName, ReasoningModelName, McpClientName string
}

// Reply is a person's answer. AskQuestionResponse and TaskFinishResponse
// share this shape on the wire.
type Reply struct {
	IsError  bool
	Meta     map[string]string
	Contents []*pb.McpResultContent
	// Who answered.
	ClientID string
	Nickname string
}

// Errors Ask, Answer and Chat return; the RPC and /ws layers map them to
// their wire codes.
var (
	ErrTimeout    = errors.New("no reply before the timeout")
	ErrDuplicate  = errors.New("the request ID is in use by a different request (another kind, question or project directory)")
	ErrNotPending = errors.New("request is not pending: it was answered, cancelled or timed out")
	ErrNoReceiver = errors.New("receiver is not online under this token")
	ErrClosed     = errors.New("server is shutting down")
	ErrWithdrawn  = errors.New("the request was withdrawn before anyone answered")
	ErrRoomFull   = errors.New("too many connections for this token")
	// ErrNotSaved: the store could not save a request (which is then
	// refused, never shown) or an answer (which is then not taken: the
	// request stays pending). A full disk, for one.
	ErrNotSaved = errors.New("the server cannot save it")
)

// notSaved says what could not be saved and why.
type notSaved struct {
	what string // "request" or "answer"
	err  error
}

// Error names the system's own reason (a full disk, a file too large)
// without the server's paths; the log has the whole error.
func (e *notSaved) Error() string {
	cause := e.err.Error()
	if errno := syscall.Errno(0); errors.As(e.err, &errno) {
		cause = errno.Error()
	}
	return "the server cannot save the " + e.what + ": " + cause
}
func (e *notSaved) Unwrap() error        { return e.err }
func (e *notSaved) Is(target error) bool { return target == ErrNotSaved }

// Options configure a Hub. The zero value is usable.
type Options struct {
	Logger *slog.Logger // nil: discard
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Store keeps requests across restarts; nil keeps them in memory.
	Store *store.Store
	// OrphanGrace is how long a request whose every caller went away
	// (without cancelling) stays pending for one to come back (default 2m).
	OrphanGrace time.Duration
	// Retention is how long an outcome is kept for callers that re-attach
	// (default 10m).
	Retention time.Duration
	// OrphanNotice is how long a request goes without a waiting caller
	// before the clients are told no agent waits for it (default 5s): a
	// caller re-attaching within it (a blip, a server restart) is not
	// shown as gone.
	OrphanNotice time.Duration
	// MissedRetention is how long an answer given while no caller waited
	// is kept for the next call from the same project (default 24h).
	MissedRetention time.Duration
	// HistoryRetention is how long settled requests stay in the store's
	// history (default 30 days).
	HistoryRetention time.Duration
	// PresenceDelay gathers joins and leaves before they are announced
	// (default 50ms), so a crowd arriving or leaving at once costs O(N)
	// frames, not O(N²).
	PresenceDelay time.Duration
}

// Presence in a room: up to presenceBatch changes are announced one by one,
// more as one online-users list. A room of more than bigRoom clients (far
// beyond a person's devices) gets a bare "changed" notice instead, at most
// every bigRoomDelay: telling everyone about everyone is N² bytes however
// it is framed, so clients of big rooms ask for the list when they want it.
const (
	presenceBatch = 16
	bigRoom       = 64
	bigRoomDelay  = 250 * time.Millisecond
)

// Statuses of UserConnectionStatusNotification. Connected and disconnected
// are the words existing agentassistant clients act on; a rename is
// announced as connected again, with the new nickname. StatusChanged is the
// bare presence notice of big rooms.
const (
	StatusConnected    = "connected"
	StatusDisconnected = "disconnected"
	StatusChanged      = "changed"
)

// Hub is safe for concurrent use.
type Hub struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	rooms map[string]*room

	quit      chan struct{} // closed by Close: every Ask returns ErrClosed
	closeOnce sync.Once
	delay     time.Duration
	store     *store.Store
	grace     time.Duration
	retention time.Duration
	notice    time.Duration
	missedFor time.Duration
	epoch     string // this run's name for the rooms' sequence numbers
	history   time.Duration
}

// Replay window: a client that comes back gets the events it missed if
// they are among a room's last replayEvents and younger than replayAge.
const (
	replayEvents = 1024
	replayAge    = 5 * time.Minute
)

// event is a numbered request event kept for replay: its frames, more
// than one when it goes out under each generation's Cmd.
type event struct {
	seq    uint64
	frames [][]byte
	at     time.Time
}

// events keeps the last replayEvents events, oldest first, in a ring: a
// new event overwrites the oldest instead of moving the others.
type events struct {
	buf   []event // grows to replayEvents, then wraps
	start int     // index of the oldest once full
}

func (q *events) push(e event) {
	if len(q.buf) < replayEvents {
		q.buf = append(q.buf, e)
		return
	}
	q.buf[q.start] = e
	q.start = (q.start + 1) % len(q.buf)
}

func (q *events) len() int { return len(q.buf) }

// at returns the i-th oldest event.
func (q *events) at(i int) *event { return &q.buf[(q.start+i)%len(q.buf)] }

// New returns an empty hub.
func New(o Options) *Hub {
	h := &Hub{log: o.Logger, now: o.Now, rooms: make(map[string]*room), quit: make(chan struct{}), delay: o.PresenceDelay,
		store: o.Store, grace: o.OrphanGrace, retention: o.Retention, notice: o.OrphanNotice, missedFor: o.MissedRetention, epoch: newID()[:12]}
	if h.notice <= 0 {
		h.notice = 5 * time.Second
	}
	if h.missedFor <= 0 {
		h.missedFor = 24 * time.Hour
	}
	if h.grace <= 0 {
		h.grace = 2 * time.Minute
	}
	if h.retention <= 0 {
		h.retention = 10 * time.Minute
	}
	h.history = o.HistoryRetention
	if h.history <= 0 {
		h.history = 30 * 24 * time.Hour
	}
	if h.delay <= 0 {
		h.delay = 50 * time.Millisecond
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

func (h *Hub) room(token string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[token]
	if r == nil {
		r = &room{digest: store.Room(token), clients: make(map[string]Client), joined: make(map[string]uint64), pending: make(map[string]*pending), settled: make(map[string]*settled), missed: make(map[string]*missed), delay: h.delay}
		h.rooms[token] = r
	}
	return r
}

// pending is a request waiting for its outcome.
type pending struct {
	req       Request
	sum       digest // of req, for callers that re-attach
	token     string
	createdAt time.Time
	deadline  time.Time
	done      chan struct{}
	reply     *Reply // set, with err, before done is closed
	err       error
	seq       uint64      // the event that delivered it; 0 when restored
	waiters   int         // Ask calls waiting on it now
	expiry    *time.Timer // fires at the deadline
	orphan    *time.Timer // fires OrphanGrace after the last waiter left
	notice    *time.Timer // fires OrphanNotice after the last waiter left
	// gone: the clients were told no agent waits for it. Read without
	// the room's lock when listing the pending requests.
	gone atomic.Bool
	// shown: saved, and announced to the clients. Until then no client
	// sees it, lists it or answers it.
	shown bool
	// settling: an outcome is being saved; other outcomes are refused
	// meanwhile (the first answer wins).
	settling bool
}

// settled is the outcome of a request that is no longer pending, kept for
// Retention so a caller that re-attaches (same ID, same request) still
// gets it.
type settled struct {
	sum   digest // of the request
	reply *Reply
	err   error
	at    time.Time
}

// Ask delivers req to every client of token and waits until one answers,
// the request times out (ErrTimeout) or is withdrawn (ErrWithdrawn), or
// ctx ends (ctx.Err()).
//
// Asking again with the ID of a pending request re-attaches to it instead
// of asking twice; with the ID of one settled within Retention, it returns
// that outcome. That is how an agent whose connection or server went away
// gets its answer after all. Only the same request re-attaches (same kind,
// project directory and text, under the same token): another one with
// that ID gets ErrDuplicate, never the answer to a question it did not ask.
//
// When the last caller waiting on a request goes away without cancelling
// (its connection dropped; the server cannot tell that from a cancel), the
// request stays pending, orphaned, for OrphanGrace, then is withdrawn.
// Cancel withdraws it at once.
func (h *Hub) Ask(ctx context.Context, token string, req Request) (*Reply, error) {
	select {
	case <-h.quit:
		return nil, ErrClosed
	default:
	}
	sum := req.digest() // outside the lock: the text may be long
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[req.ID]
	switch {
	case p != nil && p.sum != sum:
		r.mu.Unlock()
		return nil, ErrDuplicate
	case p != nil:
		p.waiters++
		stopTimer(&p.orphan)
		back, cs := h.backLocked(r, p), r.clientsLocked()
		r.mu.Unlock()
		if back != nil {
			broadcast(cs, back, "")
		}
		h.log.Info("re-attached to a pending request", "kind", req.Kind, "id", req.ID)
	default:
		if s := r.settled[req.ID]; s != nil {
			if s.sum != sum {
				r.mu.Unlock()
				return nil, ErrDuplicate
			}
			h.handedOverLocked(r, req.ID)
			r.mu.Unlock()
			h.log.Info("re-attached to a settled request", "kind", req.Kind, "id", req.ID)
			return s.reply, s.err
		}
		if m := r.missed[req.ID]; m != nil {
			if m.p.sum != sum {
				r.mu.Unlock()
				return nil, ErrDuplicate
			}
			h.handedOverLocked(r, req.ID)
			r.mu.Unlock()
			h.log.Info("re-attached to an answer kept for its agent", "kind", req.Kind, "id", req.ID)
			return m.reply, nil
		}
		now := h.now()
		p = &pending{req: req, sum: sum, token: token, createdAt: now, deadline: now.Add(req.Timeout), done: make(chan struct{}), waiters: 1}
		r.pending[req.ID] = p
		saved := h.persist(r, p, store.Pending, nil, "")
		r.mu.Unlock()
		// Shown only once saved: a question on a screen survives a crash.
		if err := wait(saved); err != nil {
			return nil, h.refuse(r, p, err)
		}
		r.mu.Lock()
		if r.pending[req.ID] != p || p.settling { // withdrawn meanwhile
			r.mu.Unlock()
			break
		}
		p.shown = true
		h.arm(r, p)
		frame := r.emitLocked(requestFrame(p), h.now())
		p.seq = r.seq
		cs := r.clientsLocked()
		r.mu.Unlock()
		broadcast(cs, frame, "")
		h.log.Debug("request pending", "kind", req.Kind, "id", req.ID, "timeout", req.Timeout)
	}

	select {
	case <-p.done:
		return p.reply, p.err
	case <-h.quit:
		return nil, ErrClosed
	case <-ctx.Done():
		h.detach(r, p)
		return nil, ctx.Err()
	}
}

// wait waits for a record to be saved; without a store there is nothing
// to wait for.
func wait(a *store.Ack) error {
	if a == nil {
		return nil
	}
	return a.Wait()
}

// refuse withdraws p, which could not be saved, before anyone saw it; its
// callers (the first one, and any that re-attached meanwhile) are told.
func (h *Hub) refuse(r *room, p *pending, err error) error {
	ns := &notSaved{what: "request", err: err}
	r.mu.Lock()
	if r.pending[p.req.ID] == p {
		delete(r.pending, p.req.ID)
		p.err = ns
		close(p.done)
	}
	r.mu.Unlock()
	h.log.Error("request refused: it cannot be saved", "kind", p.req.Kind, "id", p.req.ID, "err", err)
	return ns
}

// arm starts the deadline timer. Called with r.mu held.
func (h *Hub) arm(r *room, p *pending) {
	if p.req.Timeout > 0 {
		p.expiry = time.AfterFunc(p.deadline.Sub(h.now()), func() {
			if h.settle(r, p, nil, ErrTimeout, "timeout") == nil {
				h.log.Info("request timed out", "kind", p.req.Kind, "id", p.req.ID)
			}
		})
	}
}

// detach drops one waiter; the last one leaving orphans the request.
func (h *Hub) detach(r *room, p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[p.req.ID] != p {
		return
	}
	p.waiters--
	if p.waiters <= 0 {
		h.orphanLocked(r, p)
	}
}

func (h *Hub) orphanLocked(r *room, p *pending) {
	stopTimer(&p.orphan)
	h.noticeLocked(r, p)
	p.orphan = time.AfterFunc(h.grace, func() {
		r.mu.Lock()
		alone := r.pending[p.req.ID] == p && p.waiters <= 0
		r.mu.Unlock()
		if alone && h.settle(r, p, nil, ErrWithdrawn, "abandoned") == nil {
			h.log.Info("orphaned request withdrawn", "kind", p.req.Kind, "id", p.req.ID, "after", h.grace)
		}
	})
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// settle ends p with its outcome, tells the clients and keeps the outcome
// for callers that re-attach. It returns ErrNotPending when p was already
// settled. The outcome is saved before anyone hears of it: the agent's
// reply and the other clients' notification wait for the store. An answer
// that cannot be saved is not taken (a notSaved error; the request stays
// pending, answerable again); a timeout or withdrawal is told all the same
// (the agent's call ends either way; a restart brings the request back,
// where it times out or is withdrawn again).
func (h *Hub) settle(r *room, p *pending, rep *Reply, err error, reason string) error {
	select {
	case <-h.quit:
		return ErrNotPending // shutting down: the request stays pending in the store
	default:
	}
	r.mu.Lock()
	if r.pending[p.req.ID] != p || p.settling {
		r.mu.Unlock()
		return ErrNotPending
	}
	p.settling = true
	status := store.Answered
	switch {
	case errors.Is(err, ErrTimeout):
		status = store.TimedOut
	case err != nil:
		status = store.Cancelled
	}
	if rep != nil && p.waiters <= 0 {
		reason = NoteUndelivered // no agent waits for this answer
	}
	saved := h.persist(r, p, status, rep, reason)
	r.mu.Unlock()
	serr := wait(saved)
	r.mu.Lock()
	if serr != nil && rep != nil {
		p.settling = false
		// Its timers may have fired meanwhile, and found it settling.
		stopTimer(&p.expiry)
		h.arm(r, p)
		if p.waiters <= 0 {
			h.orphanLocked(r, p)
		}
		r.mu.Unlock()
		h.log.Error("answer refused: it cannot be saved", "kind", p.req.Kind, "id", p.req.ID, "err", serr)
		return &notSaved{what: "answer", err: serr}
	}
	if serr != nil {
		h.log.Error("outcome not saved: after a restart the request is pending again", "kind", p.req.Kind, "id", p.req.ID, "reason", reason, "err", serr)
	}
	delete(r.pending, p.req.ID)
	stopTimer(&p.expiry)
	stopTimer(&p.orphan)
	stopTimer(&p.notice)
	p.reply, p.err = rep, err
	close(p.done)
	now := h.now()
	r.keepSettled(p.req.ID, &settled{sum: p.sum, reply: rep, err: err, at: now}, now.Add(-h.retention))
	if reason == NoteUndelivered {
		// No agent waited for this answer: keep it for the next call. One
		// that re-attached while it was saved has it now.
		h.keepMissedLocked(r, p, rep, now)
		if p.waiters > 0 {
			h.handedOverLocked(r, p.req.ID)
		}
	}
	if !p.shown {
		r.mu.Unlock()
		return nil
	}
	except := ""
	var frame [][]byte
	if rep != nil {
		frame, except = r.emitLocked(replyNotificationFrame(p, rep), now), rep.ClientID
	} else {
		frame = r.emitLocked(cancelledFrame(p, reason), now)
	}
	cs := r.clientsLocked()
	r.mu.Unlock()
	broadcast(cs, frame, except)
	return nil
}

// emitLocked numbers a request event (its frames share the number), keeps
// it for replay and returns its encoding. Called with r.mu held, so numbers
// follow the order of events.
func (r *room) emitLocked(ms []*pb.WebsocketMessage, now time.Time) [][]byte {
	r.activity = now
	r.seq++
	bs := make([][]byte, len(ms))
	for i, m := range ms {
		m.Seq = r.seq
		bs[i] = marshal(m)
	}
	r.events.push(event{seq: r.seq, frames: bs, at: now})
	return bs
}

// replayLocked returns the events after from, or false when they are no
// longer all kept (the client needs a full resync).
func (r *room) replayLocked(from uint64, now time.Time) ([][]byte, bool) {
	if from > r.seq {
		return nil, false
	}
	if from == r.seq {
		return nil, true
	}
	n := r.events.len()
	if n == 0 || r.events.at(0).seq > from+1 {
		return nil, false
	}
	var out [][]byte
	for i := range n {
		if e := r.events.at(i); e.seq > from {
			if now.Sub(e.at) > replayAge {
				return nil, false
			}
			out = append(out, e.frames...)
		}
	}
	return out, true
}

// maxSettled caps the outcomes a room keeps in memory for re-attaching
// callers (the store keeps them all, as history).
const maxSettled = 4096

// keepSettled records an outcome and forgets those older than cutoff, or
// beyond maxSettled: outcomes arrive in time order, so the oldest are at
// the front of settledOrder and each is dropped once.
func (r *room) keepSettled(id string, s *settled, cutoff time.Time) {
	r.settled[id] = s
	r.settledOrder = append(r.settledOrder, id)
	for len(r.settledOrder) > 0 {
		old := r.settledOrder[0]
		o := r.settled[old]
		if o != nil && !o.at.Before(cutoff) && len(r.settledOrder) <= maxSettled {
			break
		}
		if o != nil && o != s {
			delete(r.settled, old)
		}
		r.settledOrder[0] = ""
		r.settledOrder = r.settledOrder[1:]
	}
}

// persist writes p's state and returns what tells when it is saved (nil
// without a store). Called with r.mu held, so the store sees the changes
// of a request in the order they happened.
func (h *Hub) persist(r *room, p *pending, status string, rep *Reply, note string) *store.Ack {
	if h.store == nil {
		return nil
	}
	rec := store.Record{
		Room: r.digest, ID: p.req.ID, Kind: int(p.req.Kind),
		ProjectDirectory: p.req.ProjectDirectory, Text: p.req.Text,
		TimeoutSeconds: int64(p.req.Timeout / time.Second), CreatedAt: p.createdAt, Deadline: p.deadline,
		Status: status, ClosedNote: note,
		AgentName: p.req.AgentName, ReasoningModelName: p.req.ReasoningModelName, McpClientName: p.req.McpClientName,
	}
	if status != store.Pending {
		rec.ClosedAt = h.now()
	}
	if rep != nil {
		rec.Reply = encodeReply(rep)
	}
	return h.store.Put(rec)
}

// digest identifies a request's content, so a caller re-attaching by ID
// can be told from another request that reuses the ID.
type digest [sha256.Size]byte

func (q *Request) digest() digest {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{q.Kind.String(), q.ProjectDirectory, q.Text} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var d digest
	h.Sum(d[:0])
	return d
}

// Answer records a reply to the request id of the given kind. The first
// answer wins; the other clients of the room get a reply notification once
// it is saved. An answer that cannot be saved is refused (ErrNotSaved) and
// the request stays pending.
func (h *Hub) Answer(token string, kind Kind, id string, rep Reply) error {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	shown := p != nil && p.shown
	r.mu.Unlock()
	if !shown || p.req.Kind != kind {
		return ErrNotPending
	}
	return h.settle(r, p, &rep, nil, "")
}

// Cancel withdraws a pending request of token at the agent's wish.
func (h *Hub) Cancel(token, id string) error {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	r.mu.Unlock()
	if p == nil {
		return ErrNotPending
	}
	if err := h.settle(r, p, nil, ErrWithdrawn, "cancelled"); err != nil {
		return err
	}
	h.log.Info("request cancelled by the agent", "kind", p.req.Kind, "id", id)
	return nil
}

// Close makes every waiting and future Ask return ErrClosed; pending
// requests stay pending in the store for the next start, which Close
// flushes. Idempotent.
func (h *Hub) Close() {
	h.closeOnce.Do(func() { close(h.quit) })
	if h.store != nil {
		h.store.Flush()
	}
}

// Resume is what a returning client last saw: the epoch of the server and
// the last Seq.
type Resume struct {
	Epoch string
	From  uint64
}

// Epoch names this run of the hub; clients send it back to resume.
func (h *Hub) Epoch() string { return h.epoch }

// Join adds c to the room of token and tells the others it is online.
// welcome, when not nil, builds the first frame queued to c (told whether
// the resume worked); then, for a client resuming within the replay
// window, the events it missed; all atomically with joining, so c misses
// nothing and gets nothing twice. It returns the number of the room's
// last event when c joined, for PushPending.
func (h *Hub) Join(token string, c Client, welcome func(resumed bool) []byte, resume Resume) uint64 {
	seq, _ := h.room(token).join(c, 0, welcome, resume, h.epoch, h.now())
	return seq
}

// JoinAtMost is Join into a room of at most limit clients: when the room
// is full, c is not added, welcome is not called and ErrRoomFull is
// returned. The check and the join are one step, so a burst of logins
// cannot overshoot the limit.
func (h *Hub) JoinAtMost(token string, limit int, c Client, welcome func(resumed bool) []byte, resume Resume) (uint64, error) {
	return h.room(token).join(c, limit, welcome, resume, h.epoch, h.now())
}

// PushPending sends c the requests of token that were pending before it
// joined (event number upTo, from Join) and are still pending, oldest
// first, as the frames that announced them: for clients that never ask
// for the pending list. Requests asked since reached c when they were.
//
// At most maxFrames frames go (0: no bound): the connection's send queue
// takes only so many before it counts the client as too slow, and a client
// dropped for the push would be pushed the same again when it comes back.
// Past the bound the newest requests that fit are sent. It returns how many
// pending requests were left out.
func (h *Hub) PushPending(token string, c Client, upTo uint64, maxFrames int) (left int) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock() // sent under the lock: an outcome settled later is queued after
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		if p.shown && p.seq <= upTo {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].createdAt.Before(ps[j].createdAt) })
	frames := make([][]*pb.WebsocketMessage, len(ps))
	from, n := len(ps), 0
	for from > 0 {
		f := requestFrame(ps[from-1])
		if maxFrames > 0 && n+len(f) > maxFrames {
			break
		}
		from--
		frames[from], n = f, n+len(f)
	}
	for _, f := range frames[from:] {
		for _, m := range f {
			if !c.Send(marshal(m)) {
				return from
			}
		}
	}
	return from
}

// Leave removes c from the room of token and tells the others.
func (h *Hub) Leave(token string, c Client) {
	h.room(token).leave(c, h.now())
}

// Rename tells the others of token that c, already in the room, has a new
// nickname (c.Nickname() returns it by now).
func (h *Hub) Rename(token string, c Client) {
	h.room(token).rename(c, h.now())
}

// PendingMessages lists the requests of token still waiting, oldest first,
// and the number of the room's latest event, from which to resume.
func (h *Hub) PendingMessages(token string) ([]*pb.PendingMessage, uint64) {
	return h.room(token).pendingMessages()
}

// Validity reports, for each id, whether it is still pending under token.
func (h *Hub) Validity(token string, ids []string) map[string]bool {
	return h.room(token).validity(ids)
}

// Status reports the clients logged in under token and when the room last
// saw a login or a request event.
func (h *Hub) Status(token string) (clients int, lastActivity time.Time) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients), r.activity
}

// Count reports the clients logged in under token.
func (h *Hub) Count(token string) int {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

// OnlineUsers lists the clients of token, earliest first.
func (h *Hub) OnlineUsers(token string) []*pb.OnlineUser {
	return h.room(token).onlineUsers()
}

// Chat delivers a chat message from one client of token to another.
func (h *Hub) Chat(token string, from Client, to, content string) (*pb.ChatMessage, error) {
	return h.room(token).chat(from, to, content, h.now())
}

// Backspace forwards a remote-input backspace from one client of token to
// another: the receiver gets Cmd SendBackspace naming the sender.
func (h *Hub) Backspace(token string, from Client, to string) error {
	r := h.room(token)
	r.mu.Lock()
	recv := r.clients[to]
	r.mu.Unlock()
	if recv == nil {
		return ErrNoReceiver
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                  CmdSendBackspace,
		SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: to},
		StrParam:             from.ID(),
		Nickname:             from.Nickname(),
	}))
	return nil
}

// room is everything under one token.
type room struct {
	digest  string // the store's name for the room (a digest of its token)
	mu      sync.Mutex
	clients map[string]Client
	joined  map[string]uint64 // client id -> join order
	joins   uint64
	// snapshot is clients as a slice for broadcasts; nil after a change
	// and rebuilt on the next broadcast.
	snapshot []Client
	pending  map[string]*pending
	settled  map[string]*settled
	// settledOrder is the IDs of settled, oldest first.
	settledOrder []string
	seq          uint64 // the last request event's number
	events       events // the last replayEvents of them
	activity     time.Time

	// missed holds answers given while no agent waited, by request ID,
	// until an agent takes them (missed.go); missedOrder is their IDs,
	// oldest first.
	missed      map[string]*missed
	missedOrder []string

	// Presence changes waiting to be announced, in order; the timer that
	// announces them is armed while the list is not empty.
	delay    time.Duration
	presence []presenceChange
	flushing bool
}

type presenceChange struct {
	c      Client
	status string
	at     time.Time
}

// join adds c unless the room already has limit clients (0: no limit).
func (r *room) join(c Client, limit int, welcome func(bool) []byte, resume Resume, epoch string, now time.Time) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit > 0 && len(r.clients) >= limit {
		return 0, ErrRoomFull
	}
	var missed [][]byte
	resumed := false
	if resume.From > 0 && resume.Epoch == epoch {
		missed, resumed = r.replayLocked(resume.From, now)
	}
	if welcome != nil {
		c.Send(welcome(resumed))
	}
	for _, f := range missed {
		c.Send(f)
	}
	r.clients[c.ID()] = c
	r.activity = now
	r.joins++
	r.joined[c.ID()] = r.joins
	r.snapshot = nil
	r.announceLocked(c, StatusConnected, now)
	return r.seq, nil
}

func (r *room) leave(c Client, now time.Time) {
	r.mu.Lock()
	if r.clients[c.ID()] != c {
		r.mu.Unlock()
		return
	}
	delete(r.clients, c.ID())
	delete(r.joined, c.ID())
	if len(r.clients) == 0 {
		// Maps never shrink: start afresh, or a crowd's buckets stay.
		r.clients, r.joined = make(map[string]Client), make(map[string]uint64)
	}
	r.snapshot = nil
	r.announceLocked(c, StatusDisconnected, now)
	r.mu.Unlock()
}

func (r *room) rename(c Client, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients[c.ID()] == c {
		r.announceLocked(c, StatusConnected, now)
	}
}

// announceLocked queues a presence change; the first one of a batch arms
// the flush.
func (r *room) announceLocked(c Client, status string, now time.Time) {
	r.presence = append(r.presence, presenceChange{c: c, status: status, at: now})
	if !r.flushing {
		r.flushing = true
		d := r.delay
		if len(r.clients) > bigRoom {
			d = max(d, bigRoomDelay)
		}
		time.AfterFunc(d, r.flushPresence)
	}
}

// flushPresence announces the gathered changes: each one to everyone but
// its subject when there are few, else the whole online list, encoded once,
// to everyone.
func (r *room) flushPresence() {
	r.mu.Lock()
	changes := r.presence
	r.presence = nil
	r.flushing = false
	cs := r.clientsLocked()
	r.mu.Unlock()
	if len(cs) == 0 || len(changes) == 0 {
		return
	}
	if len(cs) > bigRoom {
		broadcast(cs, [][]byte{marshal(&pb.WebsocketMessage{
			Cmd: CmdUserConnectionStatusNotification,
			UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				Status: StatusChanged, Timestamp: changes[len(changes)-1].at.Unix(),
			},
		})}, "")
		return
	}
	if len(changes) <= presenceBatch {
		for _, ch := range changes {
			broadcast(cs, [][]byte{marshal(statusFrame(ch.c, ch.status, ch.at))}, ch.c.ID())
		}
		return
	}
	us := r.onlineUsers()
	broadcast(cs, [][]byte{marshal(&pb.WebsocketMessage{
		Cmd:                    CmdGetOnlineUsers,
		GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{OnlineUsers: us, TotalCount: Count(len(us))},
	})}, "")
}

func (r *room) clientsLocked() []Client {
	if r.snapshot == nil {
		r.snapshot = make([]Client, 0, len(r.clients))
		for _, c := range r.clients {
			r.snapshot = append(r.snapshot, c)
		}
	}
	return r.snapshot
}

func (r *room) pendingMessages() ([]*pb.PendingMessage, uint64) {
	r.mu.Lock()
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		if p.shown {
			ps = append(ps, p)
		}
	}
	seq := r.seq
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].createdAt.Before(ps[j].createdAt) })
	out := make([]*pb.PendingMessage, 0, len(ps))
	for _, p := range ps {
		out = append(out, pendingMessages(p)...)
	}
	return out, seq
}

func (r *room) validity(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		p := r.pending[id]
		out[id] = p != nil && p.shown
	}
	return out
}

// onlineUsers lists the room's clients in the order they joined.
func (r *room) onlineUsers() []*pb.OnlineUser {
	r.mu.Lock()
	cs := append([]Client(nil), r.clientsLocked()...)
	order := make(map[string]uint64, len(cs))
	for _, c := range cs {
		order[c.ID()] = r.joined[c.ID()]
	}
	r.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return order[cs[i].ID()] < order[cs[j].ID()] })
	out := make([]*pb.OnlineUser, len(cs))
	for i, c := range cs {
		out[i] = onlineUser(c)
	}
	return out
}

func (r *room) chat(from Client, to, content string, now time.Time) (*pb.ChatMessage, error) {
	r.mu.Lock()
	recv := r.clients[to]
	r.mu.Unlock()
	if recv == nil {
		return nil, ErrNoReceiver
	}
	msg := &pb.ChatMessage{
		MessageId:        newID(),
		SenderClientId:   from.ID(),
		SenderNickname:   from.Nickname(),
		ReceiverClientId: recv.ID(),
		ReceiverNickname: recv.Nickname(),
		Content:          content,
		SentAt:           now.Unix(),
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                     CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: msg},
	}))
	return msg, nil
}

// broadcast sends the frames, in order, to every client but the one with
// id except.
func broadcast(cs []Client, frame [][]byte, except string) {
	// Sends to idle connections are writes on this goroutine; a crowd is
	// split among one goroutine per CPU, which the writes keep busy.
	parts := min(runtime.GOMAXPROCS(0), len(cs)/crowdPart)
	if parts < 2 {
		sendAll(cs, frame, except)
		return
	}
	var wg sync.WaitGroup
	size := (len(cs) + parts - 1) / parts
	for part := range slices.Chunk(cs, size) {
		wg.Go(func() { sendAll(part, frame, except) })
	}
	wg.Wait()
}

// crowdPart is the fewest clients worth a goroutine of their own in a
// broadcast.
const crowdPart = 128

func sendAll(cs []Client, frames [][]byte, except string) {
	for _, c := range cs {
		if c.ID() != except {
			for _, f := range frames {
				c.Send(f)
			}
		}
	}
}
