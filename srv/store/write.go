package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Writing: Put and its Ack, the writer goroutine, and the folding of the
// journal into the database.

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
			if s.direct {
				ack.finish(s.write(es))
				continue
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
	return s.db.Update(func(tx *bolt.Tx) error { return putEntries(tx, es) })
}

func putEntries(tx *bolt.Tx, es []entry) error {
	last := make(map[string]int, len(es))
	for i := range es {
		last[string(es[i].key)] = i
	}
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
}

// putAll commits rs in one transaction. A record that a later one in rs
// replaces (a request and its answer within one batch) is not written.
func (s *Store) putAll(rs []Record) error {
	return s.write(entries(rs))
}

// fillPercent: records are mostly added at the end of a room's range, so
// pages are split nearly full instead of in halves.
const fillPercent = 0.9
