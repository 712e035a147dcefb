package hub

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The records of a server that runs alone: the Shared store a hub given
// none builds, so one process runs the lifecycle of a cluster (records.go)
// over the embedded store (memory only without one). One process writes:
// a compare-and-set is checked under mu, then the record goes through the
// store's journal, and the call returns once it is saved (nothing is
// called safe before it is on disk) and applied, as a cluster's watcher
// applies what it hears. Restore applies the records kept at the last run
// first. The epoch names the run: a device that comes back after a
// restart gets a full resync. Kept here: the records the lifecycle may
// still read or change (pending, outcomes within Retention and the
// newest maxSettled of a room within its RetentionBytes, as the room
// keeps them, answers kept for an absent agent within MissedRetention,
// the newest maxMissed of a room within its MissedBytes).
//
// A change is numbered when it is applied, not when it is staged: the
// writer whose record is saved takes its room's apply lock, gives the
// change the next revision and applies it. So a room's changes are applied
// in the order of their revisions, as its replay ring numbers them, and a
// saved change waits only for changes being applied under the same lock:
// not for the goroutines of changes staged before it to wake up, and not
// for the rooms of other locks. The rooms share applyShards locks, by a
// hash of their digest. The journal's order is the order of staging; the
// two differ only between different records (one write of a record at a
// time), whose order nothing reads.
//
// Locks: an apply lock is taken first, then mu, then the hub's (the
// change is applied under the apply lock, with mu released); under mu
// only the store's queue is taken (Stage).
type localRecords struct {
	db     *store.Store // nil: memory only
	holder string       // the hub's instance name: every call is held here
	epoch  string
	// apply is the hub (Hub.applyRoom).
	apply localApplier
	// How long, and how many bytes of, outcomes and answers kept for an
	// absent agent are kept: the hub's Keeps. A zero number of bytes is
	// no bound.
	bounds Keeps
	now    func() time.Time

	// applying are the apply locks; a room's is applyLock's.
	applying [applyShards]lockorder.Mutex[lockorder.LocalApply]
	seed     maphash.Seed

	mu   lockorder.Mutex[lockorder.LocalRecords]
	recs map[localKey]*localEntry
	rev  uint64 // the last revision given
	// idle wakes those waiting for a record's write to be over (on mu);
	// waiting counts them, so that a write with none waking is spared.
	idle    sync.Cond
	waiting int
	// settled are each room's settled records in the order they were
	// written, for forgetting them in turn: past Retention, or past
	// maxSettled or RetentionBytes a room, as the rooms forget their
	// outcomes (settled.go). kept are each room's answers kept for an
	// absent agent, likewise (missed.go).
	settled, kept map[string]*localQueue
}

// localQueue is a room's settled records, or its answers kept for an
// absent agent, in the order they were written. An entry is live while
// it is its record's last write; one written again since is stale, and
// only waits its turn to go. live and bytes count the live ones.
type localQueue struct {
	q     []localQueued
	live  int
	bytes int64
}

type localKey struct{ room, id string }

// localApplier applies a change of the local records (Hub.applyRoom): it
// returns the function that sends the frames the change made, which the
// writer calls.
type localApplier interface {
	applyRoom(room string, rec SharedRecord, rev uint64) (send func())
}

type localEntry struct {
	rec SharedRecord
	rev uint64
	// busy: a write of the record is in flight. One write of a record at
	// a time, so a compare-and-set never races its own save, and the
	// journal has a record's changes in the order of their revisions.
	busy bool
	// queued is the queue whose live entry rec is; nil when none.
	queued *localQueue
}

// applyShards is how many apply locks the rooms share: enough that rooms
// seldom wait for each other on a machine's CPUs.
const applyShards = 64

type localQueued struct {
	k   localKey
	rev uint64
	at  time.Time
}

func newLocalRecords(db *store.Store, holder string, bounds Keeps, now func() time.Time) *localRecords {
	l := &localRecords{db: db, holder: holder, epoch: wire.NewID()[:12], bounds: bounds, now: now,
		recs: make(map[localKey]*localEntry), settled: make(map[string]*localQueue), kept: make(map[string]*localQueue), seed: maphash.MakeSeed()}
	l.idle.L = &l.mu
	if db != nil {
		db.Protect(l.holds)
	}
	return l
}

// holds reports whether the record of id in room is one the lifecycle
// may still read or change (kept here): the store's history budget never
// evicts it. A pending request, an outcome not yet read by a returning
// agent, an answer kept for an absent agent are each bounded per room by
// count and bytes already, so what the budget cannot evict is bounded
// too. Called by the store's writer while it commits: it takes mu, under
// which nothing waits for a commit.
func (l *localRecords) holds(room, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.recs[localKey{room, id}]
	return ok
}

// Epoch names this run's revisions.
func (l *localRecords) Epoch() string { return l.epoch }

// Create saves a new record.
func (l *localRecords) Create(_ context.Context, rec SharedRecord) (uint64, error) {
	return l.write(&rec, 0, true)
}

// Update replaces the record if its revision is still rev.
func (l *localRecords) Update(_ context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	return l.write(&rec, rev, false)
}

// Get returns the record of id in room, once a write of it is over.
func (l *localRecords) Get(_ context.Context, room, id string) (SharedRecord, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.idleLocked(localKey{room, id}); e != nil {
		return e.rec, e.rev, nil
	}
	return SharedRecord{}, 0, fmt.Errorf("read request record: %w", ErrRecordMissing)
}

// idleLocked returns the entry of k once no write of it is in flight;
// nil when there is none. Called with l.mu held; it may let it go and
// take it again.
func (l *localRecords) idleLocked(k localKey) *localEntry {
	for {
		e := l.recs[k]
		if e == nil || !e.busy {
			return e
		}
		l.waiting++
		l.idle.Wait()
		l.waiting--
	}
}

// doneLocked ends the write of e in flight. Called with l.mu held.
func (l *localRecords) doneLocked(e *localEntry) {
	e.busy = false
	if l.waiting > 0 {
		l.idle.Broadcast()
	}
}

// applyLock is the apply lock of room.
func (l *localRecords) applyLock(room string) *lockorder.Mutex[lockorder.LocalApply] {
	return &l.applying[maphash.String(l.seed, room)%applyShards]
}

// write saves rec, new (create) or over revision rev, and applies it.
// The record goes by reference from Create and Update to where it is
// applied: the path of every question and answer is deep, and a goroutine
// whose stack outgrows its size copies it, again after each garbage
// collection shrinks it.
func (l *localRecords) write(rec *SharedRecord, rev uint64, create bool) (uint64, error) {
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
	e.busy = true
	saved := l.stage(rec)
	l.mu.Unlock()

	var err error
	if saved != nil { // nil without a store: nothing to wait for
		err = saved.Wait()
	}
	if err != nil {
		l.mu.Lock()
		if fresh {
			delete(l.recs, k)
		}
		l.doneLocked(e)
		l.mu.Unlock()
		return 0, fmt.Errorf("save request record: %w", err)
	}
	return l.applySaved(k, e, rec), nil
}

// stage queues rec to be saved; nil without a store. Called with l.mu
// held. Apart from write, whose frame is then spared the room for the
// record's copy while the change is applied.
//
//go:noinline
func (l *localRecords) stage(rec *SharedRecord) *store.Ack {
	if l.db == nil {
		return nil
	}
	return l.db.Stage(rec.Record)
}

// applySaved numbers rec, saved, as the next revision and applies it
// under its room's apply lock, then sends the frames it made; e is the
// record's entry, busy with this write. It returns the revision.
func (l *localRecords) applySaved(k localKey, e *localEntry, rec *SharedRecord) uint64 {
	al := l.applyLock(rec.Room)
	al.Lock()
	l.mu.Lock()
	l.rev++
	n := l.rev
	l.unqueueLocked(e)
	e.rec, e.rev = *rec, n
	l.doneLocked(e)
	if rec.Status != store.Pending {
		l.queueLocked(k, e, rec.ClosedAt, rec.ClosedNote == ReasonUndelivered)
	}
	l.mu.Unlock()
	var send func()
	if l.apply != nil {
		send = l.apply.applyRoom(rec.Room, *rec, n)
	}
	al.Unlock()
	// A room's frames go out in the order of its revisions, whoever sends
	// first (fan.go): sent with no lock held.
	if send != nil {
		send()
	}
	return n
}

// applyRoom is Apply for a change of the local records, which name the
// room by its digest.
func (h *Hub) applyRoom(room string, rec SharedRecord, rev uint64) (send func()) {
	h.mu.Lock()
	token, ok := h.tokens[room]
	h.mu.Unlock()
	if !ok {
		h.seqs.heardRev(rev)
		return func() {}
	}
	return h.apply(token, rec, rev)
}

// sharedCtx is the context of a call to the Shared store: ctx without its
// end, bounded by sharedTimeout. The local records take no context (their
// calls end once the journal has the record, or cannot take it): for them
// it is ctx, spared a timer and two contexts on every question and answer.
func (h *Hub) sharedCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.local != nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
}

// queueLocked notes that e, the record of k, was written settled, and
// forgets those of its room's queue past their time, count or bytes
// (unless written again since). Called with l.mu held.
func (l *localRecords) queueLocked(k localKey, e *localEntry, closed time.Time, kept bool) {
	qs := l.settled
	if kept {
		qs = l.kept
	}
	q := qs[k.room]
	if q == nil {
		q = &localQueue{}
		qs[k.room] = q
	}
	q.q = append(q.q, localQueued{k: k, rev: e.rev, at: closed})
	q.live++
	q.bytes += e.rec.Bytes()
	e.queued = q
	if len(q.q) > 2*q.live+64 {
		// Written again and again (a kept answer handed over, marked):
		// the stale entries go now rather than in their turn.
		q.q = slices.DeleteFunc(q.q, func(x localQueued) bool { return !l.liveLocked(q, x) })
	}
	l.forgetRoomLocked(qs, k.room, kept, l.now())
}

// unqueueLocked takes e's last write, being written again or forgotten,
// out of its queue's counts. Called with l.mu held.
func (l *localRecords) unqueueLocked(e *localEntry) {
	if q := e.queued; q != nil {
		q.live--
		q.bytes -= e.rec.Bytes()
		e.queued = nil
	}
}

// liveLocked reports whether x is its record's last write, in q.
func (l *localRecords) liveLocked(q *localQueue, x localQueued) bool {
	e := l.recs[x.k]
	return e != nil && e.rev == x.rev && e.queued == q
}

// sweep forgets the records past their time at now, as queueLocked
// does when the next is written (Hub.sweep: there may be none).
func (l *localRecords) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for room := range l.settled {
		l.forgetRoomLocked(l.settled, room, false, now)
	}
	for room := range l.kept {
		l.forgetRoomLocked(l.kept, room, true, now)
	}
}

// forgetRoomLocked forgets, of room's queue in qs (the kept answers when
// kept), the records written before their time at now, and the oldest
// past the newest MaxSettled (MaxMissed) or past the room's bytes, but
// the last live one.
func (l *localRecords) forgetRoomLocked(qs map[string]*localQueue, room string, kept bool, now time.Time) {
	keepFor, limit, budget := l.bounds.Retention, l.bounds.MaxSettled, l.bounds.RetentionBytes
	if kept {
		keepFor, limit, budget = l.bounds.MissedFor, l.bounds.MaxMissed, l.bounds.MissedBytes
	}
	q := qs[room]
	cutoff := now.Add(-keepFor)
	n := 0
	for ; n < len(q.q); n++ {
		x := q.q[n]
		if !l.liveLocked(q, x) {
			continue // stale: goes
		}
		over := q.live > limit || budget > 0 && q.bytes > budget && q.live > 1
		if !x.at.Before(cutoff) && !over {
			break
		}
		e := l.recs[x.k]
		l.unqueueLocked(e)
		if !e.busy { // else its write in flight queues it again
			delete(l.recs, x.k)
		}
	}
	q.q = q.q[n:]
	if len(q.q) == 0 {
		delete(qs, room)
	}
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
	// The first changes, in the store's order.
	var last uint64
	for i := range recs {
		k := localKey{recs[i].Room, recs[i].ID}
		e := &localEntry{busy: true}
		l.mu.Lock()
		l.recs[k] = e
		l.mu.Unlock()
		last = l.applySaved(k, e, &recs[i])
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

// Probe tries the store's own write (store.Probe); memory only, nothing
// to refuse.
func (l *localRecords) Probe(ctx context.Context) error {
	if l.db == nil {
		return nil
	}
	return l.db.Probe(ctx)
}
