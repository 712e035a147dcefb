// Package hub keeps the token rooms: the /ws clients logged in under each
// token, the requests waiting for a person, and who answered what.
//
// One idea per file: hub.go the Hub, its options and errors; room.go a
// room's membership; cards.go a device's cards, and what a device that
// never asks for the pending list is told as it comes back (its door
// remembers the cards);
// request.go a request's lifecycle and its timers, written once over the
// records (records.go: ask, answer, withdraw, time out; apply.go: each
// change heard; seq.go: the events numbered by the records' revisions;
// link.go: the link to them), which are a cluster's (srv/cluster,
// JetStream) or this process's own (local.go, the embedded store); fan.go
// a room's request events in order, the settled note waiting its turn;
// missed.go answers kept for absent agents, handed over once, and the
// agent-gone notice; settled.go outcomes kept for re-attaching callers;
// keptbytes.go the bytes a room keeps of both; keeps.go those bounds, for
// a cluster's history budget to spare what a room still needs;
// outcome.go a settled request's outcome read back, for a channel's
// follow-up after a restart; pendingcap.go the requests a room may have
// waiting;
// replay.go the numbered events and their ring; presence.go presence
// batching; chat.go chat and remote input; peers.go the other instances'
// devices; broadcast.go the fan-out; note.go the notes a room's clients
// are told, which their door encodes in its own wire; record.go the
// mapping to the store's records; restore.go start-up and history; lost.go
// the requests a damaged store could not restore; events.go the typed
// events told to subscribers.
//
// Goroutines. The hub has no loop of its own. A request's waiting belongs
// to the caller of Ask (the RPC handler), a client's sending to its
// connection. Timers run their functions on goroutines of their own: a
// request's deadline (request.go), its orphan grace and agent-gone
// notice (records.go), an outcome that could not be saved tried again
// (link.go), a room's presence flush (presence.go) and its sweep of what
// it keeps past its time (settled.go); each takes the room's lock, finds
// whether it still applies, and does nothing otherwise. broadcast splits
// a crowd among goroutines and waits for them. The writes the hub makes
// on hearing a change run on goroutines it owns (goWrite), and so do the
// history's pruning (restore.go) and the store's probe while writes are
// refused (link.go); Close waits for them, and for every outcome and
// agent-gone mark being written (own).
//
// Locks: Hub.mu only finds a room; room.mu guards everything in it. Under
// room.mu the hub queues notes (Client.Send), which do not wait for the
// hub; no record is written under it. The order of all the server's locks
// is internal/lockorder's, explained in docs/architecture.md. The
// subscribers' lock (events.go) is held alone.
package hub

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/told"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Client is one logged-in /ws connection as the hub sees it.
type Client interface {
	ID() string
	Nickname() string
	ConnectedAt() time.Time
	// Send queues what the client is told without blocking; its door
	// encodes it. A client that cannot keep up is dropped by its
	// connection, not waited for.
	Send(n *Note) bool
}

// Request is what an agent asks a person: a question or a task report.
type Request struct {
	Kind             wire.Kind
	ID               string
	ProjectDirectory string
	// Text is the question or the summary, markdown.
	Text    string
	Timeout time.Duration
	// Who asks, when the agent says: the agent (e.g. Cursor), the model it
	// runs and the MCP client's name. Shown to the person.
	AgentName, ReasoningModelName, McpClientName string
	// WithdrawOnLeave: the caller cannot take an answer given after its
	// call went away (upstream's agentassistant-mcp), so when its last
	// call goes the request is withdrawn at once instead of waiting out
	// OrphanGrace for the agent to come back.
	WithdrawOnLeave bool
	// Door names the way the request came in ("connect", "mcp",
	// "ingress"), for the metrics; not saved.
	Door string
	// TaskFinishEra: a task report asked through the TaskFinish RPC, as
	// the older upstream generation's agentassistant-mcp does; saved with
	// it, for the /ws door's pending list to name it as that generation
	// does.
	TaskFinishEra bool
	// Questions are the choices offered with the request (the wire's
	// field 7): options the person answers with in one tap. Checked by the
	// door (wire.CheckQuestions); nil when none.
	Questions []*pb.Question
	// join: the caller re-attaches only (Reattach); the request is never
	// asked.
	join bool
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
	// Door names the way the answer came ("ws", "connect", "ingress"),
	// for the metrics; not saved.
	Door string
	// Of, unless zero, is the Shown digest of the request answered: one
	// asked since under its ID (an agent may use an ID again once the
	// first one's outcome is let go) is not answered (ErrNotPending),
	// even with the same text, when what it shows differs. A capability
	// outlives its question. Not saved.
	Of [sha256.Size]byte
	// AsWritten: the device shows no options and hears no refusal
	// (upstream's web UI and apps): its answer is taken as written, not
	// checked against the options (wire.CheckAnswer). Not saved.
	AsWritten bool
}

// Errors Ask, Answer and Chat return; the RPC and /ws layers map them to
// their wire codes.
var (
	ErrTimeout    = errors.New("no reply before the timeout")
	ErrDuplicate  = errors.New("the request ID is in use by a different request (another kind, question or project directory)")
	ErrNotPending = errors.New("request is not pending: it was answered, cancelled or timed out")
	ErrNoReceiver = errors.New("receiver is not online under this token")
	// ErrReceiverBusy: the receiver did not take a chat line now: it has
	// more waiting to be read than chat may take (or it is leaving).
	ErrReceiverBusy = errors.New("the receiver has not read the messages before this one yet; try again shortly")
	ErrClosed       = errors.New("server is shutting down")
	ErrWithdrawn    = errors.New("the request was withdrawn before anyone answered")
	// ErrHandedOver: the answer, given while no agent waited, was handed to
	// another call of the same project (TakeMissed) before this one came back.
	ErrHandedOver = errors.New("the person's answer was already handed to another call from this project, which asked after this one went away")
	ErrRoomFull   = errors.New("too many connections for this token")
	// ErrNotAnOption: the answer is not one the question's options allow
	// (a typed answer where only the options are, two where one is).
	ErrNotAnOption = errors.New("the answer is not one the question allows")
	// ErrNotSaved: the store could not save a request (which is then
	// refused, never shown) or an answer (which is then not taken: the
	// request stays pending). A full disk, for one.
	ErrNotSaved = errors.New("the server cannot save it")
	// ErrUnreachable: in cluster mode, the store (NATS) cannot be reached
	// now; a Shared store wraps its errors in it when so. What could not
	// be saved then may be saved once it is back: the caller tries again.
	ErrUnreachable = errors.New("the cluster's NATS is unreachable")
	// ErrTooLarge: an answer larger than the store takes (a cluster's
	// NATS max_payload), now or later; within ErrNotSaved.
	ErrTooLarge = errors.New("the answer is larger than the store takes")
	// ErrUnknown: Reattach found no request of that ID, pending or kept.
	ErrUnknown = errors.New("no such request: it was never asked, or its outcome is no longer kept")
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
	// Store keeps requests across restarts (local.go); nil keeps them in
	// memory.
	Store *store.Store
	// Shared, when set, is the cluster's store of requests (cluster mode,
	// records.go), shared with the other instances; Store is then unused.
	Shared Shared
	// Instance names this instance in the cluster (default: a random ID).
	Instance string
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
	// MissedBytes bounds the bytes of the answers a room keeps for absent
	// agents (default 64 MiB), RetentionBytes those of the outcomes it
	// keeps for callers that re-attach (default 32 MiB): past either the
	// oldest go, whatever their age (keptbytes.go).
	MissedBytes, RetentionBytes int64
	// MaxPending bounds the requests a room has waiting for an answer
	// (default 256), MaxPendingBytes their bytes (default 64 MiB): past
	// either a new request is refused with ErrTooManyPending
	// (pendingcap.go).
	MaxPending      int
	MaxPendingBytes int64
	// HistoryRetention is how long settled requests stay in the store's
	// history (default 30 days).
	HistoryRetention time.Duration
	// PresenceDelay gathers joins and leaves before they are announced
	// (default 50ms), so a crowd arriving or leaving at once costs O(N)
	// frames, not O(N²).
	PresenceDelay time.Duration
}

// Hub is safe for concurrent use.
type Hub struct {
	log   *slog.Logger
	now   func() time.Time
	saves told.Once // the store refusing writes now, told once (unsaved)

	mu     lockorder.Mutex[lockorder.Rooms]
	rooms  map[string]*room
	tokens map[string]string // a room's token by its digest

	quit      chan struct{} // closed by Close: every Ask returns ErrClosed
	pruneOnce sync.Once     // the history's pruning starts once (Restore)
	closeOnce sync.Once
	// The cluster-mode writes off the watcher (goWrite), and the
	// history's pruning: Close waits for them, and none starts once it
	// has begun.
	wmu       lockorder.Mutex[lockorder.HubWrites]
	wclosed   bool
	writes    sync.WaitGroup
	delay     time.Duration
	grace     time.Duration
	retention time.Duration
	notice    time.Duration
	missedFor time.Duration
	epoch     string // this run's name for the rooms' sequence numbers
	history   time.Duration
	shared    Shared        // the records: the cluster's, or local
	local     *localRecords // the records of a server that runs alone; nil in a cluster
	peers     Peers         // the other instances' devices; nil in one process
	seqs      *sequence     // the numbering of the records' revisions (seq.go)
	self      string        // this instance's name in the cluster
	linkMu    sync.Mutex    // held alone
	down      chan struct{} // closed while the cluster's link is lost (link.go)
	subs      subscribers   // the subscribers to the typed events (events.go)

	// The bytes a room keeps for absent agents, and of outcomes
	// (keptbytes.go).
	missedBytes, retentionBytes int64
	// The requests a room may have waiting, and their bytes
	// (pendingcap.go).
	maxPending      int
	maxPendingBytes int64

	// woke, set only by tests before any call, holds a caller of Ask
	// between waking and looking at why, so that an answer and the
	// call's end can meet there in a chosen order; nil in the product.
	woke func()
}

// wokeHook runs Hub.woke, if set, in a caller that woke on its request's
// outcome or its call's end and has not yet looked at the other.
func (h *Hub) wokeHook() {
	if h.woke != nil {
		h.woke()
	}
}

// New returns an empty hub.
func New(o Options) *Hub {
	opt.Default(&o.PresenceDelay, 50*time.Millisecond)
	opt.Default(&o.OrphanGrace, 2*time.Minute)
	opt.Default(&o.Retention, 10*time.Minute)
	opt.Default(&o.OrphanNotice, 5*time.Second)
	opt.Default(&o.MissedRetention, 24*time.Hour)
	opt.Default(&o.HistoryRetention, 30*24*time.Hour)
	opt.Default(&o.MissedBytes, defaultMissedBytes)
	opt.Default(&o.RetentionBytes, defaultRetentionBytes)
	opt.Default(&o.MaxPending, defaultMaxPending)
	opt.Default(&o.MaxPendingBytes, defaultMaxPendingBytes)
	opt.Logger(&o.Logger)
	opt.Clock(&o.Now)
	h := &Hub{log: o.Logger, now: o.Now, rooms: make(map[string]*room), tokens: make(map[string]string), quit: make(chan struct{}),
		delay:           o.PresenceDelay,
		grace:           o.OrphanGrace,
		retention:       o.Retention,
		notice:          o.OrphanNotice,
		missedFor:       o.MissedRetention,
		history:         o.HistoryRetention,
		missedBytes:     o.MissedBytes,
		retentionBytes:  o.RetentionBytes,
		maxPending:      o.MaxPending,
		maxPendingBytes: o.MaxPendingBytes,
		shared:          o.Shared,
		self:            cmp.Or(o.Instance, wire.NewID()),
	}
	if h.shared == nil {
		h.local = newLocalRecords(o.Store, h.self, h.Keeps(), h.now)
		h.local.apply = h
		h.shared = h.local
	}
	h.peers, _ = h.shared.(Peers)
	h.seqs, h.epoch = newSequence(h.local != nil), h.shared.Epoch()
	return h
}

func (h *Hub) room(token string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[token]
	if r == nil {
		r = &room{digest: store.Room(token), clients: make(map[string]Client), joined: make(map[string]uint64), pending: make(map[string]*pending), settled: make(map[string]*settled), missed: make(map[string]*missed), delay: h.delay}
		h.rooms[token] = r
		h.tokens[r.digest] = token
	}
	return r
}

// Close makes every waiting and future Ask return ErrClosed; pending
// requests stay pending in the store for the next start, which Close
// flushes. In cluster mode it waits for the hub's writes in flight
// (own: an outcome, the agent-gone mark, those made on hearing a change),
// each bounded by sharedTimeout, so they land before the cluster closes
// NATS. Idempotent.
func (h *Hub) Close() {
	h.closeOnce.Do(func() { close(h.quit) })
	h.wmu.Lock()
	h.wclosed = true
	h.wmu.Unlock()
	h.writes.Wait()
	if h.local != nil && h.local.db != nil {
		h.local.db.Flush()
	}
}

// goWrite runs write, a cluster-mode write to the shared store that the
// hub makes on hearing a change, on a goroutine the hub owns (own).
// Safe under room.mu.
func (h *Hub) goWrite(what, id string, write func()) bool {
	if !h.own(what, id) {
		return false
	}
	go func() {
		defer h.writes.Done()
		write()
	}()
	return true
}

// own counts a cluster-mode write to the shared store, about to start,
// among those Close waits for, so it lands before the cluster closes
// NATS; the caller calls h.writes.Done when it is over. Once Close has
// begun it reports false, and what was to be written is logged as not
// written. The write's context is not ended by Close, which would drop
// the very write it waits for: its calls are bounded by sharedTimeout.
func (h *Hub) own(what, id string) bool {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if h.wclosed {
		h.log.Warn("not written: the server is shutting down", "what", what, "id", id)
		return false
	}
	h.writes.Add(1)
	return true
}

// Epoch names this run of the hub; clients send it back to resume.
func (h *Hub) Epoch() string { return h.epoch }
