package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The writer goroutine: it appends batches to the journal, folds the
// journal into the database, and puts into the database straight what the
// journal could not take.

// How long and how much the writer lets gather in the journal before a
// fold into the database.
const (
	foldEvery   = time.Second
	foldRecords = 4096
	foldBytes   = 8 << 20
)

// holdUnfolded is how many bytes of records the writer keeps in memory
// while the database refuses them; past it, they are in the journal only.
var holdUnfolded = 4 * foldBytes

// testHookWrite, when set by a test, may fail a write into the database.
var testHookWrite func() error

// report tells that a write failed: the first of a run in the log, the
// rest at debug level until one passes (wrote).
func (s *Store) report(err error) {
	if s.onError != nil {
		s.onError(err)
	}
	if s.writes.Fail() {
		s.log.Error("the request store cannot write (is the data directory's disk full?): what it cannot save is refused, and it tries again; told once more when it writes",
			"dir", s.dir, "err", err)
		return
	}
	s.log.Debug("the request store cannot write", "err", err)
}

// wrote: a write passed, which ends a run of failures told by report.
func (s *Store) wrote() {
	if ok, n, since := s.writes.End(); ok {
		s.log.Info("the request store writes again", "failed_writes", n, "for", time.Since(since).Round(time.Second))
	}
}

// writeLoop appends what is queued to the journal a batch at a time and
// folds the journal into the database now and then; at Close it folds
// everything. There is no waiting to gather a batch: whoever put a record
// waits for it to be written, and the records put meanwhile make the next
// batch. The journal is the writer's while it appends or folds (s.busy),
// and a leading caller's (lead) in between.
func (s *Store) writeLoop() {
	w := &writer{s: s, timer: time.NewTimer(foldEvery)}
	w.timer.Stop()
	for {
		closing, due := false, false
		select {
		case _, ok := <-s.wake:
			closing = !ok
		case <-w.timer.C:
			w.armed, due = false, true
		}
		if testHookWriterWoken != nil {
			testHookWriterWoken()
		}
		s.mu.Lock()
		w.takeLedLocked()
		want := s.foldNow
		s.foldNow = false
		// Only appending and folding need the journal. Records staged
		// for callers about to Wait are theirs to write, unless handed
		// over: a wake-up to arm the fold's timer leaves them be.
		work := (len(s.queue) > 0 && s.handed) || len(s.failedLeads) > 0 || closing || w.foldDue(due || want)
		if work {
			for s.busy {
				s.idle.Wait() // a caller's lead is appending
			}
			s.busy = true
		}
		s.mu.Unlock()
		if testHookWriterTook != nil {
			testHookWriterTook()
		}
		tried, failed := false, false
		if work {
			w.appendQueue(closing)
			tried, failed = w.foldIf(closing, due || want)
		} else if len(w.unfolded) > 0 && !w.armed {
			w.arm()
		}
		s.mu.Lock()
		if work {
			s.busy = false
		}
		s.armed = w.armed
		s.writing = false
		s.unfold = len(w.unfolded)
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

// testHookWriterWoken, when set by a test, is called each time the writer
// goroutine wakes.
var testHookWriterWoken func()

// testHookWriterTook, when set by a test, is called each time the writer
// goroutine has taken what callers' leads wrote, before it works on it.
var testHookWriterTook func()

// writer is the writer goroutine's own state.
type writer struct {
	s        *Store
	timer    *time.Timer // the next fold's
	armed    bool
	unfolded []entry // in the journal, not yet in the database, in order
	size     int     // their bytes
	// closingAcks: of the batches taken at Close, saved by the last fold.
	closingAcks []*Ack
}

// takeLedLocked adds what callers' leads appended to the journal to what
// is to be folded: they came after everything already there. Called with
// s.mu held.
func (w *writer) takeLedLocked() {
	s := w.s
	w.unfolded = append(w.unfolded, s.led...)
	w.size += s.ledSize
	clear(s.led)
	s.led, s.ledSize = s.led[:0], 0
	s.unfold = len(w.unfolded) // a reader waits for them from now, not only once this wake-up is over
}

func (w *writer) foldDue(asked bool) bool {
	return len(w.unfolded) > 0 && (asked || len(w.unfolded) >= foldRecords || w.size >= foldBytes)
}

func (w *writer) arm() {
	w.timer.Reset(foldEvery)
	w.armed = true
}

// gone: the unfolded records are in the database now (or given up on).
func (w *writer) gone() {
	clear(w.unfolded)
	w.unfolded, w.size = w.unfolded[:0], 0
}

// appendQueue appends the queue to the journal, a batch at a time, until
// it is empty; at Close it keeps the batches for the last fold instead.
func (w *writer) appendQueue(closing bool) {
	s := w.s
	for {
		s.mu.Lock()
		batch, ack := s.takeQueueLocked()
		w.takeLedLocked()
		failed := s.failedLeads
		s.failedLeads = nil
		s.writing = len(batch) > 0 || len(w.unfolded) > 0
		s.mu.Unlock()
		for _, f := range failed {
			w.rescue(f.es, f.ack, f.err)
		}
		if len(batch) == 0 {
			return
		}
		es := s.encodeBatch(batch)
		switch {
		case closing:
			w.unfolded = append(w.unfolded, es...)
			w.closingAcks = append(w.closingAcks, ack) // folded at once, after this
		case s.direct:
			ack.finish(s.write(es))
		default:
			if err := s.appendJournal(es); err != nil {
				w.rescue(es, ack, err)
				continue
			}
			for _, e := range es {
				w.size += len(e.val)
			}
			w.unfolded = append(w.unfolded, es...)
			ack.finish(nil)
		}
	}
}

// foldIf folds the journal into the database when it is time (asked: the
// timer, or a reader), or it has grown, or at Close; else it arms the
// timer for the first records since the last fold. It reports whether it
// tried, and whether that failed.
func (w *writer) foldIf(closing, asked bool) (tried, failed bool) {
	s := w.s
	switch {
	case len(w.unfolded) == 0:
	case closing || w.foldDue(asked):
		if w.armed {
			w.timer.Stop()
			w.armed = false
		}
		err := s.fold(w.unfolded)
		for _, a := range w.closingAcks {
			a.finish(err)
		}
		w.closingAcks = nil
		if err != nil {
			s.report(err)
			if w.size < holdUnfolded && !closing {
				w.arm() // keep them (the journal has them too) and try again
				return true, true
			}
			if !closing && !s.keepJournal {
				// Too many to hold on to: they are let go here, and the
				// journal, which has them, is kept whole until the next
				// start puts it into the database.
				s.keepJournal = true
				s.log.Error("the database keeps refusing the journal's records: the journal is kept whole until the server starts again", "err", err)
			}
		}
		w.gone()
		return true, err != nil
	case !w.armed: // the first since the last fold: fold within a second
		w.arm()
	}
	return false, false
}

// rescue puts es, which the journal could not take (err), straight into
// the database with what the journal has, and finishes ack: saved, or
// not, with both errors.
func (w *writer) rescue(es []entry, ack *Ack, err error) {
	w.s.report(err)
	if ferr := w.s.fold(append(w.unfolded, es...)); ferr != nil {
		w.s.report(ferr)
		ack.finish(fmt.Errorf("%w; and %w", err, ferr))
		return
	}
	w.gone()
	if w.armed { // nothing left to fold: a caller's lead arms it again
		w.timer.Stop()
		w.armed = false
	}
	ack.finish(nil)
}

// entries encodes rs for the database; of records with the same key (a
// request and its answer within one batch) only the last is kept.
func entries(rs []Record) []entry {
	if len(rs) == 1 { // the usual batch: nothing to replace
		return []entry{newEntry(&rs[0])}
	}
	out := make([]entry, 0, len(rs))
	at := make(map[string]int, len(rs))
	for i := range rs {
		e := newEntry(&rs[i])
		if j, ok := at[string(e.key)]; ok {
			out[j] = e
			continue
		}
		at[string(e.key)] = len(out)
		out = append(out, e)
	}
	return out
}

// maxJournalBuf bounds the buffer kept for the next append to the journal:
// a batch larger than this (a burst, a long text) gets one of its own.
const maxJournalBuf = 256 << 10

// appendJournal writes es to the journal in one write. A write that fails
// part way (a full disk) is cut off again, so that the journal never holds
// a torn entry that later ones follow.
func (s *Store) appendJournal(es []entry) error {
	n := 0
	for _, e := range es {
		n += 8 + len(e.val)
	}
	b := s.jbuf[:0]
	if cap(b) < n {
		b = make([]byte, 0, max(n, 4<<10))
	}
	for _, e := range es {
		b = journalEntry(b, e.val)
	}
	if cap(b) <= maxJournalBuf {
		s.jbuf = b
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
	s.wrote()
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
	if s.keepJournal {
		return nil // it holds records the database does not
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
	if testHookWrite != nil {
		if err := testHookWrite(); err != nil {
			return err
		}
	}
	s.manMu.Lock()
	defer s.manMu.Unlock()
	var c counts
	var evs []Evicted
	budget, keep := s.budget, s.keeper()
	if err := s.db.Update(func(tx *bolt.Tx) (err error) {
		c, evs, err = putEntries(tx, es, budget, keep)
		return err
	}); err != nil {
		return err
	}
	s.wrote()
	s.noteLocked(es, nil, c)
	for _, ev := range evs {
		s.evictions.Note(s.log, ev, s.budget, time.Now())
	}
	return nil
}

// putEntries puts es into the records bucket, evicts what takes a room
// past budget (when not zero; budget.go), and returns how many records
// it holds and has deleted then, and what it evicted.
func putEntries(tx *bolt.Tx, es []entry, budget int64, keep func(room, id string) bool) (counts, []Evicted, error) {
	last := make(map[string]int, len(es))
	for i := range es {
		last[string(es[i].key)] = i
	}
	b := tx.Bucket(requests)
	b.FillPercent = fillPercent
	t, err := loadTally(tx)
	if err != nil {
		return counts{}, nil, err
	}
	rt := loadRooms(tx)
	for i := range es {
		if last[string(es[i].key)] != i {
			continue
		}
		old := b.Get(es[i].key)
		t.put(es[i].key, old, es[i].val)
		rt.put(es[i].key, old, es[i].val)
		if err := b.Put(es[i].key, es[i].val); err != nil {
			return counts{}, nil, err
		}
	}
	var evs []Evicted
	if budget > 0 {
		if evs, err = evictRooms(b, es, &t, rt, budget, keep); err != nil {
			return counts{}, nil, err
		}
	}
	n := 0
	for _, ev := range evs {
		n += ev.N
	}
	c := counts{records: t.n}
	if c.deleted, err = addDeleted(tx, n); err != nil {
		return counts{}, nil, err
	}
	if err := rt.save(); err != nil {
		return counts{}, nil, err
	}
	return c, evs, t.save(tx)
}

// putAll commits rs in one transaction. A record that a later one in rs
// replaces (a request and its answer within one batch) is not written.
func (s *Store) putAll(rs []Record) error {
	return s.write(entries(rs))
}

// fillPercent: records are mostly added at the end of a room's range, so
// pages are split nearly full instead of in halves.
const fillPercent = 0.9
