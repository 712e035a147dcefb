package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The records of a server that runs alone: the Shared store a hub given
// none builds, so one process runs the lifecycle of a cluster (shared.go)
// over the embedded store (memory only without one). One process writes:
// a compare-and-set is checked under mu, then the record goes through the
// store's journal, and the call returns once it is saved (nothing is
// called safe before it is on disk) and applied, in revision order, as a
// cluster's watcher applies what it hears. Restore applies the records
// kept at the last run first. The epoch names the run: a device that
// comes back after a restart gets a full resync. Kept here: the records
// the lifecycle may still read or change (pending, outcomes within
// Retention, answers kept for an absent agent within MissedRetention).
//
// Locks: mu is held alone but for the store's queue, taken under it
// (Stage), so the journal has the changes in revision order. dmu is taken
// before the hub's locks: changes are applied under it.
type localRecords struct {
	db     *store.Store // nil: memory only
	holder string       // the hub's instance name: every call is held here
	epoch  string
	// apply is the hub's Apply, by room digest; it returns the function
	// that sends the frames the change made, which the writer calls.
	apply func(room string, rec SharedRecord, rev uint64) (send func())
	// How long outcomes, and answers kept for an absent agent, are kept.
	retention, missedFor time.Duration
	now                  func() time.Time

	mu   sync.Mutex
	recs map[localKey]*localEntry
	rev  uint64 // the last revision given
	// settledQ and keptQ are the settled records in the order they were
	// written, for forgetting them in turn.
	settledQ, keptQ []localQueued

	dmu   sync.Mutex // held while a change is applied, in order
	next  uint64     // the next revision to apply
	ready map[uint64]*localChange
}

type localKey struct{ room, id string }

type localEntry struct {
	rec SharedRecord
	rev uint64
	// busy is closed when the write in flight is over: one write of a
	// record at a time, so a compare-and-set never races its own save.
	busy chan struct{}
}

type localQueued struct {
	k   localKey
	rev uint64
	at  time.Time
}

// localChange is a revision waiting its turn to be applied.
type localChange struct {
	rec  SharedRecord
	ok   bool // saved; else the revision is skipped
	done chan struct{}
	send func() // set once applied
}

func newLocalRecords(db *store.Store, holder string, retention, missedFor time.Duration, now func() time.Time) *localRecords {
	return &localRecords{db: db, holder: holder, epoch: wire.NewID()[:12], retention: retention, missedFor: missedFor, now: now,
		recs: make(map[localKey]*localEntry), next: 1, ready: make(map[uint64]*localChange)}
}

// Epoch names this run's revisions.
func (l *localRecords) Epoch() string { return l.epoch }

// Create saves a new record.
func (l *localRecords) Create(_ context.Context, rec SharedRecord) (uint64, error) {
	return l.write(rec, 0, true)
}

// Update replaces the record if its revision is still rev.
func (l *localRecords) Update(_ context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	return l.write(rec, rev, false)
}

// Get returns the record of id in room, once a write of it is over.
func (l *localRecords) Get(_ context.Context, room, id string) (SharedRecord, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.idleLocked(localKey{room, id}); e != nil {
		return e.rec, e.rev, nil
	}
	return SharedRecord{}, 0, errors.New("read request record: no record of this request")
}

// idleLocked returns the entry of k once no write of it is in flight;
// nil when there is none. Called with l.mu held; it may let it go and
// take it again.
func (l *localRecords) idleLocked(k localKey) *localEntry {
	for {
		e := l.recs[k]
		if e == nil || e.busy == nil {
			return e
		}
		busy := e.busy
		l.mu.Unlock()
		<-busy
		l.mu.Lock()
	}
}

// write saves rec, new (create) or over revision rev, and applies it.
func (l *localRecords) write(rec SharedRecord, rev uint64, create bool) (uint64, error) {
	k := localKey{rec.Room, rec.ID}
	l.mu.Lock()
	e := l.idleLocked(k)
	switch {
	case create && e != nil:
		l.mu.Unlock()
		return 0, ErrRecordExists
	case !create && (e == nil || e.rev != rev):
		l.mu.Unlock()
		return 0, ErrRecordChanged
	}
	fresh := e == nil
	if fresh {
		e = &localEntry{}
		l.recs[k] = e
	}
	busy := make(chan struct{})
	e.busy = busy
	l.rev++
	n := l.rev
	var saved *store.Ack
	if l.db != nil {
		saved = l.db.Stage(rec.Record)
	}
	c := &localChange{rec: rec, done: make(chan struct{})}
	l.mu.Unlock()

	err := wait(saved)
	l.mu.Lock()
	e.busy = nil
	close(busy)
	if err == nil {
		e.rec, e.rev = rec, n
		c.ok = true
		if rec.Status != store.Pending {
			l.queueLocked(k, n, rec)
		}
	} else if fresh {
		delete(l.recs, k)
	}
	l.mu.Unlock()
	l.deliver(n, c)
	if err != nil {
		return 0, fmt.Errorf("save request record: %w", err)
	}
	return n, nil
}

// wait waits for a record to be saved; without a store there is nothing
// to wait for.
func wait(a *store.Ack) error {
	if a == nil {
		return nil
	}
	return a.Wait()
}

// deliver applies the change numbered rev once every change before it is
// applied (or skipped), and returns once it is, and its frames are sent:
// whoever finds the next revision ready applies it, and those ready after
// it; each writer sends its own change's frames, with no lock held, as
// the room's order has them (fan.go).
func (l *localRecords) deliver(rev uint64, c *localChange) {
	l.dmu.Lock()
	l.ready[rev] = c
	for {
		next := l.ready[l.next]
		if next == nil {
			break
		}
		delete(l.ready, l.next)
		if next.ok && l.apply != nil {
			next.send = l.apply(next.rec.Room, next.rec, l.next)
		}
		close(next.done)
		l.next++
	}
	l.dmu.Unlock()
	<-c.done
	if c.send != nil {
		c.send()
	}
}

// queueLocked notes that the settled record of k was written as revision
// rev, and forgets those past their time (unless written again since).
// Called with l.mu held.
func (l *localRecords) queueLocked(k localKey, rev uint64, rec SharedRecord) {
	q := localQueued{k: k, rev: rev, at: rec.ClosedAt}
	if rec.ClosedNote == NoteUndelivered {
		l.keptQ = append(l.keptQ, q)
	} else {
		l.settledQ = append(l.settledQ, q)
	}
	now := l.now()
	l.settledQ = l.forgetLocked(l.settledQ, now.Add(-l.retention))
	l.keptQ = l.forgetLocked(l.keptQ, now.Add(-max(l.retention, l.missedFor)))
}

func (l *localRecords) forgetLocked(q []localQueued, cutoff time.Time) []localQueued {
	n := 0
	for ; n < len(q) && q[n].at.Before(cutoff); n++ {
		if e := l.recs[q[n].k]; e != nil && e.rev == q[n].rev && e.busy == nil {
			delete(l.recs, q[n].k)
		}
	}
	return q[n:]
}

// restore loads the records of the store that the lifecycle still needs
// (keep says which), gives them revisions in the store's order and
// applies them. It returns the last revision given.
func (l *localRecords) restore(keep func(store.Record) bool) (uint64, error) {
	if l.db == nil {
		return 0, nil
	}
	var recs []SharedRecord
	if err := l.db.All(func(r store.Record) error {
		if keep(r) {
			recs = append(recs, SharedRecord{Record: r, Holder: l.holder})
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read request records: %w", err)
	}
	l.mu.Lock()
	first := l.rev + 1
	for _, rec := range recs {
		l.rev++
		k := localKey{rec.Room, rec.ID}
		l.recs[k] = &localEntry{rec: rec, rev: l.rev}
		if rec.Status != store.Pending {
			l.queueLocked(k, l.rev, rec)
		}
	}
	last := l.rev
	l.mu.Unlock()
	for i, rec := range recs {
		l.deliver(first+uint64(i), &localChange{rec: rec, ok: true, done: make(chan struct{})})
	}
	return last, nil
}

// History reads a room's settled requests from the store.
func (l *localRecords) History(_ context.Context, room string, before time.Time, limit int) ([]store.Record, bool, error) {
	if l.db == nil {
		return nil, false, nil
	}
	return l.db.History(room, before, limit)
}

// ClearHistory deletes a room's settled requests from the store, but
// those keep says to keep (an answer still kept for its absent agent).
func (l *localRecords) ClearHistory(_ context.Context, room string, keep func(SharedRecord) bool) (int, error) {
	if l.db == nil {
		return 0, nil
	}
	var k func(store.Record) bool
	if keep != nil {
		k = func(r store.Record) bool { return keep(SharedRecord{Record: r}) }
	}
	return l.db.Clear(room, k)
}
