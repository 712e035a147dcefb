// Package hub keeps the token rooms: the /ws clients logged in under each
// token, the requests waiting for a person, and who answered what.
//
// The hub starts no goroutines. A request's waiting belongs to the caller of
// Ask (the RPC handler), a client's sending belongs to its connection.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
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
	ErrDuplicate  = errors.New("a request with this ID is already pending")
	ErrNotPending = errors.New("request is not pending: it was answered, cancelled or timed out")
	ErrNoReceiver = errors.New("receiver is not online under this token")
	ErrClosed     = errors.New("server is shutting down")
	ErrWithdrawn  = errors.New("the request was withdrawn before anyone answered")
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

// StatusChanged is the status of the bare presence notice of big rooms.
const StatusChanged = "changed"

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
	epoch     string // this run's name for the rooms' sequence numbers
	history   time.Duration
}

// Replay window: a client that comes back gets the events it missed if
// they are among a room's last replayEvents and younger than replayAge.
const (
	replayEvents = 1024
	replayAge    = 5 * time.Minute
)

// event is a numbered request event kept for replay.
type event struct {
	seq   uint64
	frame []byte
	at    time.Time
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
		store: o.Store, grace: o.OrphanGrace, retention: o.Retention, epoch: newID()[:12]}
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
		r = &room{digest: store.Room(token), clients: make(map[string]Client), joined: make(map[string]uint64), pending: make(map[string]*pending), settled: make(map[string]*settled), delay: h.delay}
		h.rooms[token] = r
	}
	return r
}

// pending is a request waiting for its outcome.
type pending struct {
	req       Request
	token     string
	createdAt time.Time
	deadline  time.Time
	done      chan struct{}
	reply     *Reply // set, with err, before done is closed
	err       error
	waiters   int         // Ask calls waiting on it now
	expiry    *time.Timer // fires at the deadline
	orphan    *time.Timer // fires OrphanGrace after the last waiter left
	// shown: saved, and announced to the clients. Until then no client
	// sees it, lists it or answers it.
	shown bool
	// settling: an outcome is being saved; other outcomes are refused
	// meanwhile (the first answer wins).
	settling bool
}

// settled is the outcome of a request that is no longer pending, kept for
// Retention so a caller that re-attaches (same ID) still gets it.
type settled struct {
	kind  Kind
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
// gets its answer after all.
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
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[req.ID]
	switch {
	case p != nil && p.req.Kind != req.Kind:
		r.mu.Unlock()
		return nil, ErrDuplicate
	case p != nil:
		p.waiters++
		stopTimer(&p.orphan)
		r.mu.Unlock()
		h.log.Info("re-attached to a pending request", "kind", req.Kind, "id", req.ID)
	default:
		if s := r.settled[req.ID]; s != nil && s.kind == req.Kind {
			r.mu.Unlock()
			h.log.Info("re-attached to a settled request", "kind", req.Kind, "id", req.ID)
			return s.reply, s.err
		}
		now := h.now()
		p = &pending{req: req, token: token, createdAt: now, deadline: now.Add(req.Timeout), done: make(chan struct{}), waiters: 1}
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
	p.reply, p.err = rep, err
	close(p.done)
	now := h.now()
	r.keepSettled(p.req.ID, &settled{kind: p.req.Kind, reply: rep, err: err, at: now}, now.Add(-h.retention))
	if !p.shown {
		r.mu.Unlock()
		return nil
	}
	except := ""
	var frame []byte
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

// emitLocked numbers a request event, keeps it for replay and returns its
// encoding. Called with r.mu held, so numbers follow the order of events.
func (r *room) emitLocked(m *pb.WebsocketMessage, now time.Time) []byte {
	r.activity = now
	r.seq++
	m.Seq = r.seq
	b := marshal(m)
	r.events.push(event{seq: r.seq, frame: b, at: now})
	return b
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
			out = append(out, e.frame)
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
	}
	if status != store.Pending {
		rec.ClosedAt = h.now()
	}
	if rep != nil {
		rec.Reply = encodeReply(rep)
	}
	return h.store.Put(rec)
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
// nothing and gets nothing twice.
func (h *Hub) Join(token string, c Client, welcome func(resumed bool) []byte, resume Resume) {
	h.room(token).join(c, welcome, resume, h.epoch, h.now())
}

// Leave removes c from the room of token and tells the others.
func (h *Hub) Leave(token string, c Client) {
	h.room(token).leave(c, h.now())
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

func (r *room) join(c Client, welcome func(bool) []byte, resume Resume, epoch string, now time.Time) {
	r.mu.Lock()
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
	r.announceLocked(c, "online", now)
	r.mu.Unlock()
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
	r.announceLocked(c, "offline", now)
	r.mu.Unlock()
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
		broadcast(cs, marshal(&pb.WebsocketMessage{
			Cmd: CmdUserConnectionStatusNotification,
			UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				Status: StatusChanged, Timestamp: changes[len(changes)-1].at.UnixMilli(),
			},
		}), "")
		return
	}
	if len(changes) <= presenceBatch {
		for _, ch := range changes {
			broadcast(cs, marshal(statusFrame(ch.c, ch.status, ch.at)), ch.c.ID())
		}
		return
	}
	us := r.onlineUsers()
	broadcast(cs, marshal(&pb.WebsocketMessage{
		Cmd:                    CmdGetOnlineUsers,
		GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{OnlineUsers: us, TotalCount: Count(len(us))},
	}), "")
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
	out := make([]*pb.PendingMessage, len(ps))
	for i, p := range ps {
		out[i] = pendingMessage(p)
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
		SentAt:           now.UnixMilli(),
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                     CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: msg},
	}))
	return msg, nil
}

// broadcast sends frame to every client but the one with id except.
func broadcast(cs []Client, frame []byte, except string) {
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

func sendAll(cs []Client, frame []byte, except string) {
	for _, c := range cs {
		if c.ID() != except {
			c.Send(frame)
		}
	}
}
