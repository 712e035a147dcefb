package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Each room's history in the requests bucket is bounded by its bytes
// (Options.HistoryBytes, [requests] max_history_bytes_per_token), as one
// server's on disk (srv/store/budget.go): past it the room's oldest
// settled records go. NATS cannot change a tally and the records it
// counts in one step, so there is no tally in NATS: every instance
// watches the whole bucket anyway (Cluster.apply), and keeps from it, in
// memory, what each of its rooms' records weighs and what the budget
// asks of it (its status, when it was asked and settled). That index is
// the bucket as this instance last heard it: right at start (it is read
// with the records present then), and behind by what is in flight.
//
// Never evicted: a pending record; what the lifecycle may still read
// from the bucket, within the hub's bounds (hub.Keeps: an answer kept for
// an absent agent, an outcome a returning agent may re-attach to, the
// newest within their time, count and bytes, as one server keeps them);
// and the room's last written record, so one record larger than the
// budget stays, alone.
//
// Who evicts: the instance that wrote the record that took its room
// past the budget, once it has heard that write (so its index has it),
// and every instance at start, for the rooms it finds over (a budget
// lowered, a writer killed before it evicted). A record is deleted by
// compare-and-set on the revision the index has: one that changed since
// (settled again, marked handed over) is not deleted on what is no
// longer so, and of two instances evicting a room at once, both taking
// the oldest first, the second finds the first's deletion and stops: it
// looks at the room again once it has heard the bucket as it is then
// (the first's pass was from the room as the first had heard it, which
// may lack the second's write). Neither deletes past what the budget
// asks, and they do not fight. A pass cut short by NATS is tried again
// within budgetRetry.
//
// So the budget may be passed, by the records written to a room between
// the write that took it over and the deletions that follow, each at
// most NATS's max_payload: for the moment it takes the writer to hear
// its write and delete (milliseconds), or, when the writer is killed in
// between or NATS refuses the deletions, until the room's next write or
// an instance's next start, or the retry.

// budgetRetry is how soon a pass that NATS cut short is tried again.
const budgetRetry = 30 * time.Second

// historyBudget is the index of the rooms' records and the evictions it
// owes. Its goroutine (run) is the Cluster's.
type historyBudget struct {
	c     *Cluster
	limit int64
	now   func() time.Time

	mu sync.Mutex
	// idle wakes those waiting for the evictions owed to be done (on mu).
	idle    sync.Cond
	rooms   map[string]*roomIndex
	applied uint64            // the last revision heard
	owed    map[string]uint64 // room → the revision of the write its pass waits for
	busy    bool              // a pass runs
	wake    owned.Wake
	keeps   hub.Keeps

	// The goroutine's own: what was evicted and not logged yet, by room.
	notes store.EvictLog
}

// roomIndex is one room's records as last heard, by key, and their bytes.
type roomIndex struct {
	recs  map[string]*recordMeta
	bytes int64
}

// recordMeta is what the budget needs of a record: not its value.
type recordMeta struct {
	id      string
	rev     uint64
	size    int64 // its key and value, as stored
	weight  int64 // store.Record.Bytes: what it weighs against hub.Keeps
	status  string
	note    string
	created time.Time
	closed  time.Time
	written time.Time // when this revision was stored: NATS drops it History later
}

func newHistoryBudget(c *Cluster, limit int64) *historyBudget {
	b := &historyBudget{c: c, limit: limit, now: c.Now, rooms: make(map[string]*roomIndex),
		owed: make(map[string]uint64), wake: owned.NewWake(), notes: store.EvictLog{Where: "in NATS"}}
	b.idle.L = &b.mu
	return b
}

// on says whether the budget is kept; nil is one that is not.
func (b *historyBudget) on() bool { return b != nil && b.limit > 0 }

// heard takes e, a change of the requests bucket heard in order, into
// the index: rec is its record decoded, nil for a deletion or a value
// that does not decode (which weighs what it weighs, and is evicted as
// any settled record).
func (b *historyBudget) heard(e jetstream.KeyValueEntry, rec *hub.SharedRecord) {
	if !b.on() {
		return
	}
	room, id, ok := splitKey(e.Key())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applied = max(b.applied, e.Revision())
	if _, ours := b.c.rooms[room]; ok && ours {
		ri := b.rooms[room]
		if e.Operation() != jetstream.KeyValuePut {
			if ri != nil {
				ri.remove(e.Key())
			}
		} else {
			if ri == nil {
				ri = &roomIndex{recs: make(map[string]*recordMeta)}
				b.rooms[room] = ri
			}
			m := &recordMeta{id: id, rev: e.Revision(), size: int64(len(e.Key()) + len(e.Value())), written: e.Created()}
			if rec != nil {
				m.weight, m.status, m.note, m.created, m.closed = rec.Bytes(), rec.Status, rec.ClosedNote, rec.CreatedAt, rec.ClosedAt
			}
			ri.put(e.Key(), m)
		}
		if ri != nil && len(ri.recs) == 0 {
			delete(b.rooms, room)
		}
	}
	if len(b.owed) > 0 {
		b.wake.Tell()
	}
	b.idle.Broadcast() // waitIdle waits for what is heard
}

func (ri *roomIndex) put(key string, m *recordMeta) {
	ri.remove(key)
	ri.recs[key] = m
	ri.bytes += m.size
}

func (ri *roomIndex) remove(key string) {
	if old := ri.recs[key]; old != nil {
		ri.bytes -= old.size
		delete(ri.recs, key)
	}
}

// wrote notes a write of size bytes to key, of room, saved at revision
// rev: when it takes the room past the budget, the room owes a pass
// once the write is heard. Under the budget (nearly always) it costs a
// look-up.
func (b *historyBudget) wrote(room, key string, size int, rev uint64) {
	if !b.on() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	total := int64(size)
	if ri := b.rooms[room]; ri != nil {
		total += ri.bytes
		if old := ri.recs[key]; old != nil {
			total -= old.size
		}
	}
	if total <= b.limit {
		return
	}
	b.owed[room] = max(b.owed[room], rev)
	b.wake.Tell()
}

// run evicts what the rooms owe, until ctx ends: at start, once the
// records present then are heard, the rooms over the budget; then each
// room whose write took it over, once the write is heard.
func (b *historyBudget) run(ctx context.Context, keeps hub.Keeps) {
	select {
	case <-ctx.Done():
		return
	case <-b.c.ready:
	}
	b.mu.Lock()
	b.keeps = keeps
	for room, ri := range b.rooms {
		if ri.bytes > b.limit {
			b.owed[room] = 0
		}
	}
	b.mu.Unlock()
	retry := time.NewTicker(budgetRetry)
	defer retry.Stop()
	failed := make(map[string]bool) // rooms whose pass NATS cut short
	for {
		for {
			room, ok := b.next()
			if !ok {
				break
			}
			err := b.evict(ctx, room)
			if err != nil && ctx.Err() == nil {
				b.c.log.Warn("cannot keep a token's history within its bytes in NATS for now; trying again",
					"room", room[:min(8, len(room))], "err", err, "retry_in", budgetRetry)
				failed[room] = true
			}
			b.mu.Lock()
			b.busy = false
			b.idle.Broadcast()
			b.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-retry.C:
			b.mu.Lock()
			for room := range failed {
				if _, owed := b.owed[room]; !owed {
					b.owed[room] = 0
				}
			}
			b.mu.Unlock()
			clear(failed)
		}
	}
}

// next takes a room whose pass is due (its write heard), if any, and
// marks a pass running.
func (b *historyBudget) next() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for room, rev := range b.owed {
		if rev <= b.applied {
			delete(b.owed, room)
			b.busy = true
			return room, true
		}
	}
	return "", false
}

// evict deletes room's oldest settled records but those it spares until
// the room is within the budget, as the index has it. It stops at the
// first record that changed since it was heard (another instance is
// evicting, or the record is no longer what the index says), and owes
// the room a pass once that change is heard.
func (b *historyBudget) evict(ctx context.Context, room string) error {
	victims, over := b.victims(room)
	if over <= 0 {
		return nil
	}
	ev := store.Evicted{Room: room}
	var err error
	for _, v := range victims {
		if over <= 0 {
			break
		}
		dctx, cancel := context.WithTimeout(ctx, sharedTimeoutCluster)
		err = b.c.reqs.Delete(dctx, key(room, v.id), jetstream.LastRevision(v.rev))
		cancel()
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			err = b.again(ctx, room)
			break
		}
		if err != nil {
			err = fmt.Errorf("delete a request record: %w", err)
			break
		}
		b.mu.Lock()
		if ri := b.rooms[room]; ri != nil {
			if m := ri.recs[key(room, v.id)]; m != nil && m.rev == v.rev {
				// Gone from the index now, not when its deletion is heard:
				// the next pass does not take it again meanwhile.
				ri.remove(key(room, v.id))
			}
			ev.Left = ri.bytes
		}
		b.mu.Unlock()
		over -= v.size
		ev.N++
		ev.Bytes += v.size
	}
	if ev.N > 0 {
		b.notes.Note(b.c.log, ev, b.limit, b.now())
	}
	return err
}

// again owes room another pass once this instance has heard the bucket
// as it is now: its pass found a record changed since it was heard.
// Another instance's pass deleted it, most often, and brought the room
// within the budget as that instance had heard it, which may be before
// this instance's write that took the room over; or the record was
// settled again. Either way the index is behind on the room, and a pass
// from it as it is now deletes what is still over, if anything.
func (b *historyBudget) again(ctx context.Context, room string) error {
	rctx, cancel := context.WithTimeout(ctx, sharedTimeoutCluster)
	defer cancel()
	rev, err := b.c.lastRevision(rctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.owed[room] = max(b.owed[room], rev)
	b.mu.Unlock()
	return nil
}

// sharedTimeoutCluster bounds one deletion of an eviction.
const sharedTimeoutCluster = 10 * time.Second

// victims is what room may lose, oldest first, and by how many bytes it
// is over the budget; the records NATS has dropped by age leave the
// index first (NATS says nothing when it drops them).
func (b *historyBudget) victims(room string) ([]*recordMeta, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ri := b.rooms[room]
	if ri == nil {
		return nil, 0
	}
	now := b.now()
	dropped := now.Add(-b.c.o.History)
	var newest *recordMeta
	var pending int
	settled := make([]*recordMeta, 0, len(ri.recs))
	for k, m := range ri.recs {
		if m.written.Before(dropped) {
			ri.remove(k)
			continue
		}
		if newest == nil || m.rev > newest.rev {
			newest = m
		}
		if m.status == store.Pending {
			pending++
			continue
		}
		settled = append(settled, m)
	}
	if len(ri.recs) == 0 {
		delete(b.rooms, room)
	}
	over := ri.bytes - b.limit
	if over <= 0 {
		return nil, 0
	}
	spared := b.spared(settled, now)
	out := settled[:0]
	for _, m := range settled {
		if m != newest && !spared[m] {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(x, y *recordMeta) int {
		if c := x.created.Compare(y.created); c != 0 {
			return c
		}
		return cmp.Compare(x.id, y.id)
	})
	return out, over
}

// spared are the settled records of a room the lifecycle may still read
// from the bucket, as one server's local records keep them (hub.Keeps):
// the newest answers kept for an absent agent within their time, count
// and bytes, and the newest other outcomes likewise, the newest of each
// whatever its bytes. Called with mu held.
func (b *historyBudget) spared(settled []*recordMeta, now time.Time) map[*recordMeta]bool {
	var kept, outcomes []*recordMeta
	for _, m := range settled {
		switch {
		case m.status == store.Answered && m.note == hub.ReasonUndelivered:
			if !m.closed.Before(now.Add(-b.keeps.MissedFor)) {
				kept = append(kept, m)
			}
		case !m.closed.Before(now.Add(-b.keeps.Retention)):
			outcomes = append(outcomes, m)
		}
	}
	out := make(map[*recordMeta]bool, len(kept)+len(outcomes))
	spare := func(ms []*recordMeta, limit int, budget int64) {
		slices.SortFunc(ms, func(x, y *recordMeta) int { return y.closed.Compare(x.closed) })
		var bytes int64
		for i, m := range ms {
			if bytes += m.weight; i >= limit || i > 0 && budget > 0 && bytes > budget {
				return
			}
			out[m] = true
		}
	}
	spare(kept, b.keeps.MaxMissed, b.keeps.MissedBytes)
	spare(outcomes, b.keeps.MaxSettled, b.keeps.RetentionBytes)
	return out
}
