package store

// Writing: Put and Stage, their Ack, and a waiting caller's lead: it
// appends its batch to the journal itself when the journal is free
// (writer.go has the writer goroutine and the folds).

// Ack tells when the records put with it are saved: in the journal (or
// the database), where a crash of the server no longer loses them (nor,
// with Options.Sync, a crash of the machine). All records queued until
// someone takes the queue to write it share one.
type Ack struct {
	done chan struct{}
	err  error
	s    *Store // whose queue holds the records, for Wait to write them
}

func newAck(s *Store) *Ack { return &Ack{done: make(chan struct{}), s: s} }

func (a *Ack) finish(err error) {
	a.err = err
	close(a.done)
}

// Done is closed once the records are saved or cannot be. A record
// staged (Stage) and not yet written is handed to the writer goroutine.
func (a *Ack) Done() <-chan struct{} {
	if a.s != nil {
		a.s.handOver(a)
	}
	return a.done
}

// Wait waits for Done and returns why the records could not be saved, or
// nil once they are. When the records are still queued and the journal
// is free, Wait writes them itself, on the caller's goroutine (lead).
func (a *Ack) Wait() error {
	if a.s != nil {
		a.s.lead(a)
	}
	<-a.done
	return a.err
}

// Put queues r to be written, after every record queued before it, and
// returns at once; the writer goroutine writes it. The Ack tells when r
// is saved, or that it cannot be: whoever announces r as safe waits for
// it.
func (s *Store) Put(r Record) *Ack {
	a := s.Stage(r)
	s.handOver(a)
	return a
}

// Stage is Put for a caller that waits for the record right away: its
// Ack's Wait writes the batch on the caller's goroutine when the journal
// is free, sparing the hand-over to the writer goroutine and back (two
// wake-ups on the path of every question and answer). Call Wait (or
// Done) on the Ack: until then the record may stay queued.
func (s *Store) Stage(r Record) *Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueLocked(r)
}

func (s *Store) queueLocked(r Record) *Ack {
	if s.closed {
		a := newAck(nil)
		a.finish(ErrClosed)
		return a
	}
	s.queue = append(s.queue, r)
	if s.ack == nil {
		s.ack = newAck(s)
	}
	return s.ack
}

// wakeLocked tells the writer goroutine there is work. Called with s.mu held.
func (s *Store) wakeLocked() {
	if s.closed {
		return // the writer is taking everything already
	}
	s.wake.Tell()
}

// handOver makes sure the writer goroutine writes a's records if they are
// still queued.
func (s *Store) handOver(a *Ack) {
	s.mu.Lock()
	if s.ack == a {
		s.handed = true
		s.wakeLocked()
	}
	s.mu.Unlock()
}

// lead writes the queue, which a's records are in, to the journal on the
// caller's goroutine, unless the journal is busy (the writer goroutine
// appends or folds: it is woken to take the queue after) or the writer
// has taken them already. What lead wrote waits in s.led for the writer's
// next fold.
func (s *Store) lead(a *Ack) {
	s.mu.Lock()
	if s.ack != a {
		s.mu.Unlock()
		return // taken: by the writer, or by another caller's lead
	}
	if s.busy || len(s.failedLeads) > 0 || s.closed || s.direct {
		// The writer takes the queue: after its own work, or after
		// putting a failed lead's batch into the database (which what
		// follows it must not overtake).
		s.handed = true
		s.wakeLocked()
		s.mu.Unlock()
		return
	}
	batch, _ := s.takeQueueLocked()
	s.busy = true
	s.mu.Unlock()
	es := s.encodeBatch(batch)
	err := s.appendJournal(es)
	s.mu.Lock()
	s.busy = false
	s.idle.Broadcast()
	if err != nil {
		// The writer puts them straight into the database, as it does
		// its own batches when the journal fails, and then finishes a.
		s.failedLeads = append(s.failedLeads, failedLead{es: es, ack: a, err: err})
		s.wakeLocked()
		s.mu.Unlock()
		return
	}
	s.led = append(s.led, es...)
	for _, e := range es {
		s.ledSize += len(e.val)
	}
	if !s.armed || len(s.led) >= foldRecords || s.ledSize >= foldBytes {
		s.wakeLocked() // to fold them in time
	}
	s.mu.Unlock()
	a.finish(nil)
}

// failedLead is a batch a caller's lead could not append to the journal.
type failedLead struct {
	es  []entry
	ack *Ack
	err error
}

// takeQueueLocked takes the queue and its Ack, for the caller to write.
// Called with s.mu held.
func (s *Store) takeQueueLocked() ([]Record, *Ack) {
	batch, ack := s.queue, s.ack
	s.queue, s.spare, s.ack, s.handed = s.spare, nil, nil, false
	return batch, ack
}

// encodeBatch encodes a batch taken from the queue, lets go of its texts
// and replies, and hands its array back for the next queue.
func (s *Store) encodeBatch(batch []Record) []entry {
	es := entries(batch)
	clear(batch)
	s.mu.Lock()
	s.spare = batch[:0]
	s.mu.Unlock()
	return es
}

// Flush waits until every record queued so far is in the database, or a
// fold into it failed (a full disk: they stay in the journal).
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.folds
	for (len(s.queue) > 0 || s.writing || s.busy || s.unfold > 0 || len(s.led) > 0) && !s.closed && (s.folds == start || !s.failed) {
		if !s.busy { // else whoever has the journal tells when it is free
			s.foldNow, s.handed = true, true
			s.wakeLocked()
		}
		s.idle.Wait()
	}
	if len(s.queue) == 0 {
		s.handed = false // what is staged next is its waiter's to write
	}
}
