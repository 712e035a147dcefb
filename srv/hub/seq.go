package hub

import (
	"context"
	"sync"
	"time"
)

// One numbering of the request events on every instance.
//
// A room's request events are numbered by the revision of the shared
// record whose change made them (the bucket's sequence, the same on every
// instance), and made only when the change is heard (Apply), in the order
// of the revisions: every instance makes the same events under the same
// numbers, and the epoch names the bucket (Shared.Epoch), not the run. So
// a device that comes back on another instance resumes from the number it
// holds: it gets what it missed, in order, nothing twice.
//
// An instance's rings are complete only from the changes it followed from
// the start (Following): a device that last saw an older event gets a
// full resync there, as it does when the ring no longer holds it. A device
// that saw an event this instance has not heard yet is waited for, up to
// catchUp, then resynced.

// catchUp bounds how long a resuming device waits for this instance to
// hear the events it has seen elsewhere.
const catchUp = 2 * time.Second

// sequence is what the hub knows of the records' numbering.
type sequence struct {
	mu    sync.Mutex
	since uint64 // the rings hold every event after since
	heard uint64 // the last revision applied
	more  chan struct{}
	// alone: the records are this process's own (local.go), every change
	// applied from the first: there is nothing more to wait for.
	alone bool
}

func newSequence(alone bool) *sequence {
	if alone {
		return &sequence{alone: true} // the rings hold every change
	}
	return &sequence{since: ^uint64(0)} // until Following
}

// Following says that every change after rev, the last one before the
// cluster's watch began, is applied here from now on, in order. Called by
// the watcher once the records present at its start are applied: a change
// overwritten before that is older than one of them, so the rings are
// complete after the later of rev and the last change applied.
func (h *Hub) Following(rev uint64) {
	h.seqs.mu.Lock()
	h.seqs.since = max(rev, h.seqs.heard)
	h.seqs.mu.Unlock()
}

// heardRev records that the change rev was applied.
func (s *sequence) heardRev(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev <= s.heard {
		return
	}
	s.heard = rev
	if s.more != nil {
		close(s.more)
		s.more = nil
	}
}

// window waits, up to catchUp or until ctx ends, until the change from
// is heard, and returns the range the rings hold.
func (s *sequence) window(ctx context.Context, from uint64) (since, heard uint64) {
	deadline := time.NewTimer(catchUp)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		since, heard = s.since, s.heard
		if heard >= from || s.alone {
			s.mu.Unlock()
			return since, heard
		}
		if s.more == nil {
			s.more = make(chan struct{})
		}
		more := s.more
		s.mu.Unlock()
		select {
		case <-more:
		case <-deadline.C:
			return since, heard
		case <-ctx.Done():
			return since, heard
		}
	}
}

// emitAtLocked numbers a request event's notes seq (a shared record's
// revision), keeps them for replay and returns them. Called with r.mu
// held, in the order of the revisions.
func (r *room) emitAtLocked(ns []*Note, seq uint64, now time.Time) []*Note {
	r.activity = now
	r.seq = seq
	for _, n := range ns {
		n.Seq = seq
	}
	r.events.push(event{seq: seq, notes: ns, at: now})
	return ns
}

// replayLocked returns the events after from, numbered with gaps
// (the revisions of other rooms, and changes that make no event), or false
// when this instance cannot tell it holds them all.
func (r *room) replayLocked(from, since, heard uint64, now time.Time) ([]*Note, bool) {
	if from < since || from > heard {
		return nil, false
	}
	if r.events.dropped > from {
		return nil, false // one after from was dropped
	}
	n := r.events.len()
	var out []*Note
	for i := range n {
		if e := r.events.at(i); e.seq > from {
			if now.Sub(e.at) > replayAge {
				return nil, false
			}
			out = append(out, e.notes...)
		}
	}
	return out, true
}
