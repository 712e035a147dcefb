// Package store keeps the agents' requests and their answers in an
// embedded database (bbolt: pure Go, one file, transactions, nothing to
// install), so a restart loses neither a pending question nor an answer
// given while the agent was away.
package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/boltfile"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/told"
)

// FileName is the database file inside the data directory.
const FileName = "agentassistant.db"

var requests = []byte("requests")

// Status of a stored request.
const (
	Pending   = "pending"
	Answered  = "answered"
	Cancelled = "cancelled"
	TimedOut  = "timeout"
)

// Record is one request and, once it has one, its outcome. It is stored
// under its room, creation time and ID, so a room's records follow each
// other in the order they were made: commits add to the end of the tree
// rather than all over it, and history reads them in order.
type Record struct {
	// Room is a digest of the token: the token itself is not stored.
	Room             string    `json:"room"`
	ID               string    `json:"id"`
	Kind             int       `json:"kind"`
	ProjectDirectory string    `json:"projectDirectory,omitempty"`
	Text             string    `json:"text"`
	TimeoutSeconds   int64     `json:"timeoutSeconds"`
	CreatedAt        time.Time `json:"createdAt"`
	Deadline         time.Time `json:"deadline"`
	Status           string    `json:"status"`
	// Reply is the answer, protobuf-encoded (McpResultContent list and
	// the rest), when Status is Answered.
	Reply []byte `json:"reply,omitempty"`
	// ReplyDoor is the way the answer came (hub.Reply.Door).
	ReplyDoor  string    `json:"replyDoor,omitempty"`
	ClosedAt   time.Time `json:"closedAt,omitzero"`
	ClosedNote string    `json:"closedNote,omitempty"`
	// Who asked, when the agent said: the agent, its model, its MCP client.
	AgentName          string `json:"agentName,omitempty"`
	ReasoningModelName string `json:"reasoningModelName,omitempty"`
	McpClientName      string `json:"mcpClientName,omitempty"`
	// WithdrawOnLeave: the agent's call takes no answer given after it
	// ended, so a pending request is withdrawn at the next start.
	WithdrawOnLeave bool `json:"withdrawOnLeave,omitempty"`
	// TaskFinishEra: a task report asked through the older generation's
	// TaskFinish RPC, listed to clients under that name.
	TaskFinishEra bool `json:"taskFinishEra,omitempty"`
	// Questions are the choices offered with the request, protobuf-encoded
	// (an McpAskQuestionRequest carrying only its Questions).
	Questions []byte `json:"questions,omitempty"`
}

// Store is safe for concurrent use. Writes made with Put are written by
// one writer goroutine, owned by the Store, in order: appended to the
// journal a batch at a time (what gathered while the last batch was
// written), and folded from there into the database many per transaction
// (journal.go). A caller that waits for its record at once (Stage, then
// Wait) appends the batch itself when the journal is free; the writer
// still folds. Readers fold first; Close folds everything.
type Store struct {
	db  *bolt.DB
	log *slog.Logger

	mu      lockorder.Mutex[lockorder.Store]
	queue   []Record
	ack     *Ack       // the queue's
	spare   []Record   // the last batch's array, handed back for the next queue
	wake    owned.Wake // signalled when the writer goroutine has work: records put or handed over, a reader, a lead to fold
	idle    *sync.Cond // broadcast when the writer has emptied the queue, or the journal is free
	writing bool
	busy    bool // the journal is in use: by the writer, or by a caller's lead
	handed  bool // the queue is the writer's to write (a Put, or a staged record handed over)
	armed   bool // the writer will fold within a second
	// led: what callers' leads appended to the journal, for the writer
	// to fold; ledSize: their bytes. failedLeads: what they could not.
	led         []entry
	ledSize     int
	failedLeads []failedLead
	closed      bool
	unfold      int  // records in the journal and not yet in the database
	foldNow     bool // a reader wants everything in the database
	folds       int  // fold attempts so far
	failed      bool // the last one failed
	sync        bool
	direct      bool // commit each batch into bbolt, without the journal: only BenchmarkAck sets it
	writer      sync.WaitGroup
	journal     JournalFile // whoever has it (busy): the writer goroutine, or a caller's lead
	jsize       int64       // the journal's length, as written
	jbuf        []byte      // the last append's buffer, kept for the next (whoever has the journal)
	// keepJournal: folds no longer empty the journal, which holds records
	// the database refused too long to keep them in memory (writer.go).
	keepJournal bool
	onError     func(error)
	writes      told.Once // the writes failing now, told once (report)
	manWrites   told.Once // the manifest's

	// manMu orders the commits with the manifest written after each
	// (manifest.go); a leaf: nothing else is taken under it, and s.mu
	// never with it.
	manMu       sync.Mutex
	dir         string
	pendingRefs map[string]*Lost // by key: the pending records in the database
	records     uint64           // how many records the database holds
	deleted     uint64           // how many it deleted on purpose (deletedKey)
	lost        []Lost           // found lost, not dismissed yet
	evictions   EvictLog         // under manMu

	// budget is Options.HistoryBytes once Open has replayed the journal
	// (its records were within their rooms' budgets when written); keep
	// is what Protect gave (budget.go).
	budget int64
	keep   atomic.Pointer[func(room, id string) bool]
}

// Options for Open.
type Options struct {
	// Sync fsyncs the journal after every append and the database at
	// every fold. Without it a change survives a crash of the server but
	// not of the machine.
	Sync bool
	// Logger hears what Open found wrong with the files, what it kept
	// aside and what was lost; nil discards.
	Logger *slog.Logger
	// OnError, if set, hears about failed background writes.
	OnError func(error)
	// WrapJournal, if set, is given the journal file and returns what is
	// written to instead: tests put a failing or stalling file in between.
	WrapJournal func(JournalFile) JournalFile
	// HistoryBytes bounds the bytes each room's records take on disk
	// (keys and values as stored): past it, a commit that adds to a room
	// deletes the room's oldest settled records (budget.go). Zero is no
	// bound.
	HistoryBytes int64
}

// JournalFile is what the writer needs of the journal file.
type JournalFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// ErrClosed: the store was closed before the record was written.
var ErrClosed = errors.New("the store is closed")

// Open opens (creating if needed) the database in dir. A database or
// journal found damaged is set aside (renamed, with ".damaged-" and the
// time, for inspection), the intact records it held are restored, and
// what was lost is logged; Open fails only when it cannot set the file
// aside, or another process has the database open.
func Open(dir string, o Options) (*Store, error) {
	opt.Logger(&o.Logger)
	log := o.Logger
	path := filepath.Join(dir, FileName)
	prior, merr := readManifest(dir)
	if merr != nil {
		log.Error("the list of pending requests beside the database is damaged: were the database damaged too, what it lost could not be named", "file", filepath.Join(dir, ManifestName), "err", merr)
	}
	found, err := checkPath(path)
	if err != nil {
		return nil, err
	}
	kept := ""
	if found.damaged() {
		kept, err = boltfile.SetAside(path)
		if err != nil {
			return nil, fmt.Errorf("the request store %s is damaged (%s) and could not be set aside (%w): move it out of the way and start again",
				path, found.problems[0], err)
		}
	}
	// The freelist is rebuilt on open rather than written with every
	// commit: cheaper commits for a write-heavy store.
	var db *bolt.DB
	err = boltfile.Safely(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout: lockWait, NoSync: !o.Sync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
		})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		err = errInUse
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, log: log, wake: owned.NewWake(), sync: o.Sync, onError: o.OnError, dir: dir, pendingRefs: make(map[string]*Lost), evictions: EvictLog{Where: "on disk"}}
	inDB := make(map[string]bool)
	roomWrong := false
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(requests); err != nil {
			return err
		}
		if _, err := upgrade(tx); err != nil {
			return err
		}
		t, err := loadTally(tx)
		if err != nil {
			return err
		}
		b := tx.Bucket(requests)
		if found.damaged() {
			for _, k := range slices.Sorted(maps.Keys(found.recs)) {
				r := found.recs[k]
				v := encode(&r)
				t.put([]byte(k), b.Get([]byte(k)), v)
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		s.records, s.deleted = t.n, loadDeleted(tx)
		sizes := make(map[string]int64)
		if err := b.ForEach(func(k, v []byte) error {
			inDB[string(k)] = true
			sizes[string(roomOf(k))] += pairBytes(k, v)
			var r Record
			if v != nil && decode(v, &r) == nil && r.Status == Pending {
				s.pendingRefs[string(k)] = pendingRef(&r)
			}
			return nil
		}); err != nil {
			return err
		}
		if roomWrong, err = recountRooms(tx, sizes); err != nil {
			return err
		}
		return t.save(tx)
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if roomWrong && !found.damaged() {
		log.Warn("the tally of each token's history bytes differed from the records: counted afresh")
	}
	records := counts{s.records, s.deleted}
	replayed, err := s.openJournal(dir, o.WrapJournal)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.budget = max(o.HistoryBytes, 0)
	var damaged []string
	if found != nil {
		damaged = found.lost
	}
	miss := findMissing(prior, func(k string) bool { return inDB[k] }, records, replayed, damaged)
	s.reportOpen(found, kept, path, miss, len(inDB)+len(replayed))
	s.manMu.Lock()
	if prior != nil {
		s.lost = prior.Lost
	}
	now := time.Now()
	for _, l := range miss.pending {
		l.Found = now
		s.lost = append(s.lost, l)
	}
	if len(s.lost) > maxLost {
		s.lost = slices.Clone(s.lost[len(s.lost)-maxLost:])
	}
	err = s.saveManifestLocked()
	s.manMu.Unlock()
	if err != nil {
		log.Warn("the list of pending requests beside the database was not written: were the database damaged now, what it lost could not be named", "err", err)
	}
	s.idle = sync.NewCond(&s.mu)
	s.writer.Go(s.writeLoop)
	return s, nil
}

// reportOpen logs what Open found: a damaged database set aside (kept), and
// the records it, or a database that was not found damaged, lost.
func (s *Store) reportOpen(found *checked, kept, path string, miss missing, restored int) {
	lost := []any{"lost", miss.total(), "lost_records", strings.Join(miss.named, " ")}
	if miss.unnamed > 0 {
		lost = append(lost, "lost_unnamed", miss.unnamed)
	}
	if len(miss.pending) > 0 {
		lost = append(lost, "lost_pending", len(miss.pending))
	}
	switch {
	case found.damaged():
		args := []any{"file", path, "kept_as", kept, "problems", strings.Join(found.problems, "; "), "restored", restored}
		if miss.unknown {
			// No manifest: the keys the damaged file no longer shows
			// are not known, so neither is how many it lost.
			lost = append(lost, "lost_unknown", "there was no list of the pending requests to compare with (a store written by an earlier version)")
		}
		s.log.Error("the request store was damaged: it was set aside and its intact records are restored",
			append(args, lost...)...)
		if found.fromScan > 0 {
			s.log.Warn("some restored records were found on pages the damaged tree no longer reached; they may include history cleared before",
				"records", found.fromScan)
		}
	case miss.total() > 0:
		s.log.Error("the request store lacks records it held before (missing, emptied, or an older copy): they are lost",
			append([]any{"file", path, "restored", restored}, lost...)...)
	}
}

// lockWait is how long Open waits for another process to let go of the
// database.
const lockWait = 2 * time.Second

// errInUse: another process has the database open.
var errInUse = errors.New("another agentassistant-srv has it open (or had it, and its lock has not yet gone)")

// checkPath checks the database at path, if there is one, holding bbolt's
// shared lock on it meanwhile, so that a database another server is
// writing is never mistaken for a damaged one. It returns nil for a
// database still to be made.
func checkPath(path string) (*checked, error) {
	fi, err := os.Stat(path) // #nosec G703 -- the database in our data directory
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil, nil // bbolt makes it
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	var lock *bolt.DB
	err = boltfile.Safely(func() (err error) {
		lock, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockWait})
		return err
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open store %s: %w", path, errInUse)
	case err == nil:
		defer func() { _ = lock.Close() }()
	} // else bbolt cannot read it; checkFile says why
	f, err := os.Open(path) // #nosec G304 G703 -- our own file in the data directory
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer func() { _ = f.Close() }()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return checkFile(f, fi.Size()), nil
}

// Close commits what is queued, stops the writer and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.wake)
	s.writer.Wait()
	return errors.Join(s.journal.Close(), s.db.Close())
}
