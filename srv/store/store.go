// Package store keeps the agents' requests and their answers in an
// embedded database (bbolt: pure Go, one file, transactions, nothing to
// install), so a restart loses neither a pending question nor an answer
// given while the agent was away.
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
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
	Reply      []byte    `json:"reply,omitempty"`
	ClosedAt   time.Time `json:"closedAt,omitzero"`
	ClosedNote string    `json:"closedNote,omitempty"`
	// Who asked, when the agent said: the agent, its model, its MCP client.
	AgentName          string `json:"agentName,omitempty"`
	ReasoningModelName string `json:"reasoningModelName,omitempty"`
	McpClientName      string `json:"mcpClientName,omitempty"`
}

// Store is safe for concurrent use. Writes made with Put are written by
// one writer goroutine, owned by the Store, in order: appended to the
// journal a batch at a time (what gathered while the last batch was
// written), and folded from there into the database many per transaction
// (journal.go). Readers fold first; Close folds everything.
type Store struct {
	db  *bolt.DB
	log *slog.Logger

	mu      sync.Mutex
	queue   []Record
	ack     *Ack          // the queue's
	spare   []Record      // the last batch's array, handed back for the next queue
	wake    chan struct{} // signalled when the queue gets records
	idle    *sync.Cond    // broadcast when the writer has emptied the queue
	writing bool
	closed  bool
	unfold  int  // records in the journal and not yet in the database
	foldNow bool // a reader wants everything in the database
	folds   int  // fold attempts so far
	failed  bool // the last one failed
	sync    bool
	writer  sync.WaitGroup
	journal JournalFile // the writer's
	jsize   int64       // the journal's length, as the writer wrote it
	onError func(error)
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
	// WrapJournal, if set, is given the journal file and returns what the
	// writer writes to instead: tests put a failing or stalling file in
	// between.
	WrapJournal func(JournalFile) JournalFile
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

// Ack tells when the records put with it are saved: in the journal (or
// the database), where a crash of the server no longer loses them (nor,
// with Options.Sync, a crash of the machine). All records put while the
// writer was busy share one.
type Ack struct {
	done chan struct{}
	err  error
}

func newAck() *Ack { return &Ack{done: make(chan struct{})} }

func (a *Ack) finish(err error) {
	a.err = err
	close(a.done)
}

// Done is closed once the records are saved or cannot be.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Wait waits for Done and returns why the records could not be saved, or
// nil once they are.
func (a *Ack) Wait() error {
	<-a.done
	return a.err
}

// Open opens (creating if needed) the database in dir. A database or
// journal found damaged is set aside (renamed, with ".damaged-" and the
// time, for inspection), the intact records it held are restored, and
// what was lost is logged; Open fails only when it cannot set the file
// aside, or another process has the database open.
func Open(dir string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dir, FileName)
	found, err := checkPath(path)
	if err != nil {
		return nil, err
	}
	if found.damaged() {
		kept, err := setAside(path)
		if err != nil {
			return nil, fmt.Errorf("the request store %s is damaged (%s) and could not be set aside (%w): move it out of the way and start again",
				path, found.problems[0], err)
		}
		log.Error("the request store was damaged: it was set aside and its intact records are restored",
			"file", path, "kept_as", kept, "problems", strings.Join(found.problems, "; "),
			"restored", len(found.recs), "lost", len(found.lost), "lost_records", strings.Join(found.lost, " "))
		if found.fromScan > 0 {
			log.Warn("some restored records were found on pages the damaged tree no longer reached; they may include history cleared before",
				"records", found.fromScan)
		}
	}
	// The freelist is rebuilt on open rather than written with every
	// commit: cheaper commits for a write-heavy store.
	var db *bolt.DB
	err = safely(func() (err error) {
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
		if found.damaged() {
			b := tx.Bucket(requests)
			for _, k := range slices.Sorted(maps.Keys(found.recs)) {
				r := found.recs[k]
				v := encode(&r)
				t.put([]byte(k), b.Get([]byte(k)), v)
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return t.save(tx)
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{db: db, log: log, wake: make(chan struct{}, 1), sync: o.Sync, onError: o.OnError}
	if err := s.openJournal(dir, o.WrapJournal); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.idle = sync.NewCond(&s.mu)
	s.writer.Go(s.writeLoop)
	return s, nil
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
	err = safely(func() (err error) {
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

// safely runs fn, turning a panic or a fault on a memory-mapped page into
// an error, for what bbolt does on this goroutine.
func safely(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the database is damaged: %v", p)
		}
	}()
	return fn()
}

// setAside renames the file at path to path.damaged-TIME (and a number,
// should that be taken) and returns the new name.
func setAside(path string) (string, error) {
	base := path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) { // #nosec G703 -- beside our own file
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, name); err != nil { // #nosec G703 -- as above
		return "", fmt.Errorf("set aside: %w", err)
	}
	return name, nil
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

// Put queues r to be written, after every record queued before it, and
// returns at once. The Ack tells when r is saved, or that it cannot be:
// whoever announces r as safe waits for it.
func (s *Store) Put(r Record) *Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		a := newAck()
		a.finish(ErrClosed)
		return a
	}
	s.queue = append(s.queue, r)
	if s.ack == nil {
		s.ack = newAck()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.ack
}

// Enqueue is Put for a record no one waits for.
func (s *Store) Enqueue(r Record) { s.Put(r) }

// Flush waits until every record queued so far is in the database, or a
// fold into it failed (a full disk: they stay in the journal).
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.folds
	for (len(s.queue) > 0 || s.writing || s.unfold > 0) && !s.closed && (s.folds == start || !s.failed) {
		s.foldNow = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
		s.idle.Wait()
	}
}

// How long and how much the writer lets gather in the journal before a
// fold into the database.
const (
	foldEvery   = time.Second
	foldRecords = 4096
	foldBytes   = 8 << 20
)

func (s *Store) report(err error) {
	if s.onError != nil {
		s.onError(err)
	}
}

// writeLoop appends what is queued to the journal a batch at a time and
// folds the journal into the database now and then; at Close it folds
// everything. There is no waiting to gather a batch: whoever put a record
// waits for it to be written, and the records put meanwhile make the next
// batch.
func (s *Store) writeLoop() {
	timer := time.NewTimer(foldEvery)
	timer.Stop()
	armed := false
	var unfolded []entry
	var closingAcks []*Ack // of the batches taken at Close, saved by the last fold
	size := 0
	for {
		closing, due := false, false
		select {
		case _, ok := <-s.wake:
			closing = !ok
		case <-timer.C:
			armed, due = false, true
		}
		for {
			s.mu.Lock()
			batch, ack := s.queue, s.ack
			s.queue, s.spare, s.ack = s.spare, nil, nil
			s.writing = len(batch) > 0 || len(unfolded) > 0
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			es := entries(batch)
			clear(batch) // let go of the texts and replies
			s.mu.Lock()
			s.spare = batch[:0]
			s.mu.Unlock()
			if closing {
				unfolded = append(unfolded, es...)
				closingAcks = append(closingAcks, ack)
				continue // folded below, at once
			}
			if err := s.appendJournal(es); err != nil {
				s.report(err)
				// Straight into the database, with what the journal has.
				if ferr := s.fold(append(unfolded, es...)); ferr != nil {
					s.report(ferr)
					ack.finish(fmt.Errorf("%w; and %w", err, ferr))
					continue
				}
				clear(unfolded)
				unfolded, size = unfolded[:0], 0
				ack.finish(nil)
				continue
			}
			for _, e := range es {
				size += len(e.val)
			}
			unfolded = append(unfolded, es...)
			ack.finish(nil)
		}
		s.mu.Lock()
		want := s.foldNow
		s.foldNow = false
		s.mu.Unlock()
		tried, failed := false, false
		switch {
		case len(unfolded) == 0:
		case due || closing || want || len(unfolded) >= foldRecords || size >= foldBytes:
			if armed {
				timer.Stop()
				armed = false
			}
			err := s.fold(unfolded)
			tried, failed = true, err != nil
			for _, a := range closingAcks {
				a.finish(err)
			}
			closingAcks = nil
			if err != nil {
				s.report(err)
				if size < 4*foldBytes && !closing {
					timer.Reset(foldEvery) // keep them (the journal has them too) and try again
					armed = true
					break
				}
			}
			clear(unfolded)
			unfolded, size = unfolded[:0], 0
		case !armed: // the first since the last fold: fold within a second
			timer.Reset(foldEvery)
			armed = true
		}
		s.mu.Lock()
		s.writing = false
		s.unfold = len(unfolded)
		if tried {
			s.folds++
			s.failed = failed
		}
		s.idle.Broadcast()
		s.mu.Unlock()
		if closing {
			return
		}
	}
}

// entries encodes rs for the database; of records with the same key (a
// request and its answer within one batch) only the last is kept.
func entries(rs []Record) []entry {
	out := make([]entry, 0, len(rs))
	at := make(map[string]int, len(rs))
	for i := range rs {
		e := entry{key: rs[i].Key(), val: encode(&rs[i])}
		if j, ok := at[string(e.key)]; ok {
			out[j] = e
			continue
		}
		at[string(e.key)] = len(out)
		out = append(out, e)
	}
	return out
}

// appendJournal writes es to the journal in one write. A write that fails
// part way (a full disk) is cut off again, so that the journal never holds
// a torn entry that later ones follow.
func (s *Store) appendJournal(es []entry) error {
	n := 0
	for _, e := range es {
		n += 8 + len(e.val)
	}
	b := make([]byte, 0, n)
	for _, e := range es {
		b = journalEntry(b, e.val)
	}
	if _, err := s.journal.Write(b); err != nil {
		return fmt.Errorf("append to journal: %w", s.undoAppend(err))
	}
	if s.sync {
		if err := s.journal.Sync(); err != nil {
			return fmt.Errorf("sync journal: %w", s.undoAppend(err))
		}
	}
	s.jsize += int64(n)
	return nil
}

func (s *Store) undoAppend(err error) error {
	if terr := s.journal.Truncate(s.jsize); terr != nil {
		return errors.Join(err, fmt.Errorf("cut the journal back: %w", terr))
	}
	return err
}

// fold puts es into the database in one transaction, then empties the
// journal.
func (s *Store) fold(es []entry) error {
	if err := s.write(es); err != nil {
		return fmt.Errorf("fold journal: %w", err)
	}
	if err := s.journal.Truncate(0); err != nil {
		return fmt.Errorf("empty journal: %w", err)
	}
	s.jsize = 0
	return nil
}

// write puts es into the database in one transaction, with the tally. Of
// entries with the same key, the last one is written.
func (s *Store) write(es []entry) error {
	last := make(map[string]int, len(es))
	for i := range es {
		last[string(es[i].key)] = i
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(requests)
		b.FillPercent = fillPercent
		t, err := loadTally(tx)
		if err != nil {
			return err
		}
		for i := range es {
			if last[string(es[i].key)] != i {
				continue
			}
			t.put(es[i].key, b.Get(es[i].key), es[i].val)
			if err := b.Put(es[i].key, es[i].val); err != nil {
				return err
			}
		}
		return t.save(tx)
	})
}

// putAll commits rs in one transaction. A record that a later one in rs
// replaces (a request and its answer within one batch) is not written.
func (s *Store) putAll(rs []Record) error {
	return s.write(entries(rs))
}

// fillPercent: records are mostly added at the end of a room's range, so
// pages are split nearly full instead of in halves.
const fillPercent = 0.9

// Room returns the room key of a token.
func Room(token string) string {
	d := sha256.Sum256([]byte("agentassistant room\x00" + token))
	return hex.EncodeToString(d[:16])
}

// stamp is t in Unix nanoseconds for keys, clamped to what int64 holds
// (1970 to 2262), so any time, even one a client made up, has a place.
func stamp(t time.Time) uint64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return uint64(t.UnixNano()) // #nosec G115 -- not negative, checked above
}

// Key is where r is stored: room, creation time (16 hex digits of Unix
// nanoseconds, so keys sort by time) and ID.
func (r *Record) Key() []byte {
	k := make([]byte, 0, len(r.Room)+len(r.ID)+18)
	k = append(k, r.Room...)
	k = append(k, '/')
	k = fmt.Appendf(k, "%016x", stamp(r.CreatedAt))
	k = append(k, '/')
	return append(k, r.ID...)
}

// All calls fn for every record, in key order.
func (s *Store) All(fn func(Record) error) error {
	s.Flush()
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(requests).ForEach(func(_, v []byte) error {
			var r Record
			if decode(v, &r) == nil {
				return fn(r)
			}
			return nil // a damaged record is skipped, not fatal
		})
	})
}

// Prune deletes settled records closed before cutoff.
func (s *Store) Prune(cutoff time.Time) (int, error) {
	s.Flush()
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		t, err := loadTally(tx)
		if err != nil {
			return err
		}
		c := tx.Bucket(requests).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r Record
			if decode(v, &r) != nil || (r.Status != Pending && r.ClosedAt.Before(cutoff)) {
				t.remove(k, v)
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		}
		return t.save(tx)
	})
	return n, err
}

// History returns the settled records of room created before before,
// newest first, at most limit, and whether there are more. Queued records
// are committed first, so a request settled a moment ago is there.
func (s *Store) History(room string, before time.Time, limit int) ([]Record, bool, error) {
	s.Flush()
	var out []Record
	prefix := []byte(room + "/")
	// Keys sort by creation time within a room: walk back from before and
	// stop after one more than a page.
	start := fmt.Appendf(append([]byte(nil), prefix...), "%016x", stamp(before))
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		var k, v []byte
		if first, _ := c.Seek(start); first == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) <= limit; k, v = c.Prev() {
			var r Record
			if decode(v, &r) == nil && r.Status != Pending && r.CreatedAt.Before(before) {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Clear deletes the settled records of room; pending ones stay. Queued
// records are committed first, so none comes back after the clear.
func (s *Store) Clear(room string) (int, error) {
	s.Flush()
	n := 0
	prefix := []byte(room + "/")
	err := s.db.Update(func(tx *bolt.Tx) error {
		t, err := loadTally(tx)
		if err != nil {
			return err
		}
		c := tx.Bucket(requests).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if decode(v, &r) == nil && r.Status == Pending {
				continue
			}
			t.remove(k, v)
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return t.save(tx)
	})
	return n, err
}
