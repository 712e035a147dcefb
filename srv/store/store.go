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
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
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

// Store is safe for concurrent use. Writes made with Enqueue are written
// by one writer goroutine, owned by the Store, in order: appended to the
// journal a gathered batch at a time, and folded from there into the
// database many per transaction (journal.go). Readers fold first; Close
// folds everything.
type Store struct {
	db *bolt.DB

	mu      sync.Mutex
	queue   []Record
	spare   []Record      // the last batch's array, handed back for the next queue
	wake    chan struct{} // signalled when the queue gets records
	idle    *sync.Cond    // broadcast when the writer has emptied the queue
	writing bool
	closed  bool
	unfold  int  // records in the journal and not yet in the database
	foldNow bool // a reader wants everything in the database
	delay   time.Duration
	sync    bool
	writer  sync.WaitGroup
	journal *os.File // the writer's
	// OnError, if set, hears about failed background writes.
	OnError func(error)
}

// Options for Open.
type Options struct {
	// Sync fsyncs the journal after every append and the database at
	// every fold. Without it a change survives a crash of the server but
	// not of the machine.
	Sync bool
	// GroupDelay is how long the writer gathers records before an append
	// to the journal (default 2ms): fewer, larger writes under load, at
	// the cost of that much more in the crash window. Negative: at once.
	GroupDelay time.Duration
}

// Open opens (creating if needed) the database in dir.
func Open(dir string, o Options) (*Store, error) {
	// The freelist is rebuilt on open rather than written with every
	// commit: cheaper commits for a write-heavy store.
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{
		Timeout: 2 * time.Second, NoSync: !o.Sync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(requests); err != nil {
			return err
		}
		_, err := upgrade(tx)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{db: db, wake: make(chan struct{}, 1), delay: o.GroupDelay, sync: o.Sync}
	if s.delay == 0 {
		s.delay = 2 * time.Millisecond
	}
	if err := s.openJournal(dir); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.idle = sync.NewCond(&s.mu)
	s.writer.Go(s.writeLoop)
	return s, nil
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

// Enqueue queues r to be written, after every record queued before it.
// It does not wait: a crash can lose the last ~millisecond of records.
func (s *Store) Enqueue(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.queue = append(s.queue, r)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every record queued so far is in the database.
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for (len(s.queue) > 0 || s.writing || s.unfold > 0) && !s.closed {
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

// writeLoop appends what is queued to the journal in gathered batches and
// folds the journal into the database now and then; at Close it folds
// everything.
func (s *Store) writeLoop() {
	timer := time.NewTimer(foldEvery)
	timer.Stop()
	armed := false
	var unfolded []entry
	size := 0
	for {
		closing, due := false, false
		select {
		case _, ok := <-s.wake:
			closing = !ok
			if !closing && s.delay > 0 {
				time.Sleep(s.delay) // gather: one append for what arrives meanwhile
			}
		case <-timer.C:
			armed, due = false, true
		}
		for {
			s.mu.Lock()
			batch := s.queue
			s.queue, s.spare = s.spare, nil
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
			for _, e := range es {
				size += len(e.val)
			}
			unfolded = append(unfolded, es...)
			if closing {
				continue // folded below, at once
			}
			if err := s.appendJournal(es); err != nil {
				if s.OnError != nil {
					s.OnError(err)
				}
				size = foldBytes // fold now: the journal cannot be trusted with them
			}
		}
		s.mu.Lock()
		want := s.foldNow
		s.foldNow = false
		s.mu.Unlock()
		switch {
		case len(unfolded) == 0:
		case due || closing || want || len(unfolded) >= foldRecords || size >= foldBytes:
			if armed {
				timer.Stop()
				armed = false
			}
			if err := s.fold(unfolded); err != nil {
				if s.OnError != nil {
					s.OnError(err)
				}
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
		s.idle.Broadcast()
		s.mu.Unlock()
		if closing {
			return
		}
	}
}

// entries encodes rs for the database; of records with the same key (a
// request and its answer within one gather) only the last is kept.
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

// appendJournal writes es to the journal in one write.
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
		return fmt.Errorf("append to journal: %w", err)
	}
	if s.sync {
		if err := s.journal.Sync(); err != nil {
			return fmt.Errorf("sync journal: %w", err)
		}
	}
	return nil
}

// fold puts es into the database in one transaction, then empties the
// journal.
func (s *Store) fold(es []entry) error {
	last := make(map[string]int, len(es))
	for i := range es {
		last[string(es[i].key)] = i
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(requests)
		b.FillPercent = fillPercent
		for i := range es {
			if last[string(es[i].key)] != i {
				continue
			}
			if err := b.Put(es[i].key, es[i].val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fold journal: %w", err)
	}
	if err := s.journal.Truncate(0); err != nil {
		return fmt.Errorf("empty journal: %w", err)
	}
	return nil
}

// putAll commits rs in one transaction. A record that a later one in rs
// replaces (a request and its answer within one gather) is not written.
func (s *Store) putAll(rs []Record) error {
	keys := make([][]byte, len(rs))
	last := make(map[string]int, len(rs))
	for i := range rs {
		keys[i] = rs[i].Key()
		last[string(keys[i])] = i
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(requests)
		b.FillPercent = fillPercent
		for i := range rs {
			if last[string(keys[i])] != i {
				continue
			}
			if err := b.Put(keys[i], encode(&rs[i])); err != nil {
				return err
			}
		}
		return nil
	})
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
		c := tx.Bucket(requests).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r Record
			if decode(v, &r) != nil || (r.Status != Pending && r.ClosedAt.Before(cutoff)) {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		}
		return nil
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
		c := tx.Bucket(requests).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if decode(v, &r) == nil && r.Status == Pending {
				continue
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
