package store

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
)

// Each room's history is bounded by bytes on disk (Options.HistoryBytes),
// not only by age: an answer may carry 16 MiB of images, so one token's
// holder answering in a loop could otherwise fill the data directory
// within the 30 days history is kept, and then every token's requests
// are refused. Past a room's budget its oldest settled records go first.
// What the lifecycle may still read or change is never evicted: a
// pending record, and what the keep function given with Protect names
// (the records the server holds in memory: outcomes not yet read by a
// returning agent, answers kept for an absent agent). Nor is the last
// record a commit writes to the room, so one record larger than the
// budget stays, alone; the others a commit writes (a fold of the journal
// holds many) may go, oldest first, as any.
//
// The bytes of each room are tallied in the rooms bucket, in the same
// transaction as the records, so the tally survives a crash as the
// records do and a write never scans the room to know its size; Open
// counts them once afresh, in the scan it makes anyway.

// roomsBucket holds each room's bytes: room → uint64, little-endian.
var roomsBucket = []byte("rooms")

// evictLogEvery: after a room's first eviction is logged, the next ones
// are summed and logged at most this often (EvictLog).
const evictLogEvery = time.Hour

// roomOf is the room of the record key k.
func roomOf(k []byte) []byte {
	if i := bytes.IndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return k
}

// idOf is the request ID of the record key k (room/stamp/id): all that
// follows the stamp, for an ID is the agent's to choose, slashes
// included ("build/42").
func idOf(k []byte) []byte {
	_, rest, ok := bytes.Cut(k, []byte{'/'})
	if !ok {
		return nil
	}
	_, id, ok := bytes.Cut(rest, []byte{'/'})
	if !ok {
		return nil
	}
	return id
}

// pairBytes is what a record costs on disk: its key and its value.
func pairBytes(k, v []byte) int64 { return int64(len(k) + len(v)) }

// roomTally is the rooms bucket within one transaction, and the changes
// it made, written back by save.
type roomTally struct {
	b     *bolt.Bucket
	delta map[string]int64
}

func loadRooms(tx *bolt.Tx) *roomTally {
	return &roomTally{b: tx.Bucket(roomsBucket), delta: make(map[string]int64)}
}

func (r *roomTally) put(k, old, v []byte) {
	d := pairBytes(k, v)
	if old != nil {
		d -= pairBytes(k, old)
	}
	r.delta[string(roomOf(k))] += d
}

func (r *roomTally) remove(k, v []byte) { r.delta[string(roomOf(k))] -= pairBytes(k, v) }

func (r *roomTally) stored(room string) int64 {
	v := r.b.Get([]byte(room))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v)) // #nosec G115 -- a room's bytes, far below 2^63
}

// total is room's bytes as this transaction leaves them.
func (r *roomTally) total(room string) int64 { return r.stored(room) + r.delta[room] }

func (r *roomTally) save() error {
	for room, d := range r.delta {
		if d == 0 {
			continue
		}
		if n := r.stored(room) + d; n > 0 {
			if err := r.b.Put([]byte(room), binary.LittleEndian.AppendUint64(nil, uint64(n))); err != nil {
				return err
			}
		} else if err := r.b.Delete([]byte(room)); err != nil {
			return err
		}
	}
	return nil
}

// recountRooms sets the rooms bucket to sizes, the rooms' bytes as Open
// counted them, and reports whether it held other numbers (none at all,
// in a store written before rooms were tallied, is not other numbers).
func recountRooms(tx *bolt.Tx, sizes map[string]int64) (wrong bool, err error) {
	b := tx.Bucket(roomsBucket)
	if b == nil {
		b, err = tx.CreateBucket(roomsBucket)
		if err != nil {
			return false, err
		}
		for _, room := range slices.Sorted(maps.Keys(sizes)) {
			if err := b.Put([]byte(room), binary.LittleEndian.AppendUint64(nil, uint64(sizes[room]))); err != nil { // #nosec G115 -- sizes are not negative
				return false, err
			}
		}
		return false, nil
	}
	var stale [][]byte
	if err := b.ForEach(func(k, v []byte) error {
		if len(v) != 8 || int64(binary.LittleEndian.Uint64(v)) != sizes[string(k)] { // #nosec G115 -- as stored
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return false, err
	}
	for room, n := range sizes {
		if v := b.Get([]byte(room)); v == nil && n > 0 {
			stale = append(stale, []byte(room))
		}
	}
	for _, room := range stale {
		var err error
		if n := sizes[string(room)]; n > 0 {
			err = b.Put(room, binary.LittleEndian.AppendUint64(nil, uint64(n)))
		} else {
			err = b.Delete(room)
		}
		if err != nil {
			return false, err
		}
	}
	return len(stale) > 0, nil
}

// Evicted is what a commit (or a cluster's pass, srv/cluster) evicted
// from one room past its budget: how many records, their bytes, and the
// room's bytes left.
type Evicted struct {
	Room        string
	N           int
	Bytes, Left int64
}

// evictRooms evicts, from each room the commit of es made larger and took
// past budget, its oldest settled records until it is within the budget
// again, but those keep names, and the last of es in the room. It
// deletes from b and keeps both tallies in step.
func evictRooms(b *bolt.Bucket, es []entry, t *tally, rt *roomTally, budget int64, keep func(room, id string) bool) ([]Evicted, error) {
	var out []Evicted
	var last map[string]string // room → the key of its last record in es
	for _, room := range slices.Sorted(maps.Keys(rt.delta)) {
		if rt.delta[room] <= 0 || rt.total(room) <= budget {
			continue
		}
		if last == nil {
			last = make(map[string]string)
			for _, e := range es {
				last[string(roomOf(e.key))] = string(e.key)
			}
		}
		ev, err := evictRoom(b, room, last[room], t, rt, budget, keep)
		if err != nil {
			return nil, err
		}
		if ev.N > 0 {
			out = append(out, ev)
		}
	}
	return out, nil
}

func evictRoom(b *bolt.Bucket, room, newest string, t *tally, rt *roomTally, budget int64, keep func(room, id string) bool) (Evicted, error) {
	ev := Evicted{Room: room}
	prefix := []byte(room + "/")
	over := rt.total(room) - budget
	var gone [][]byte
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && over > 0; k, v = c.Next() {
		if string(k) == newest || storedStatus(v) == Pending || keep != nil && keep(room, string(idOf(k))) {
			continue
		}
		size := pairBytes(k, v)
		t.remove(k, v)
		rt.remove(k, v)
		over -= size
		ev.N++
		ev.Bytes += size
		gone = append(gone, bytes.Clone(k))
	}
	// Deleted after the walk: a bbolt cursor that deletes as it walks
	// may step over the record after the deleted one.
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return ev, err
		}
	}
	ev.Left = rt.total(room)
	return ev, nil
}

// storedStatus is the status of the stored record v, read without
// decoding the rest (its text and answer may be megabytes, and eviction
// walks past the pending ones each time); "" when v is damaged.
func storedStatus(v []byte) string {
	if len(v) > 0 && v[0] == '{' {
		var r Record
		if decode(v, &r) != nil {
			return ""
		}
		return r.Status
	}
	if len(v) == 0 || v[0] != formatWire {
		return ""
	}
	for b := v[1:]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == fStatus && typ == protowire.BytesType {
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(s)
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return ""
		}
		b = b[n:]
	}
	return "" // a status no record goes without: the field is never empty
}

// fStatus is storeproto.Record's status field.
const fStatus protowire.Number = 9

// EvictLog logs what is evicted from rooms past their budget: a room's
// first eviction at once, later ones summed, at most once per
// evictLogEvery, so that a loop that keeps the room at its budget does
// not log once per answer. The room is named by the start of its
// digest, never by its token. Its owner serialises the calls.
type EvictLog struct {
	// Where is where the history is kept, as the log says it ("on
	// disk", "in NATS").
	Where string
	notes map[string]*evictNote
}

// evictNote is what has been evicted from a room since it was last
// logged.
type evictNote struct {
	n      int
	bytes  int64
	logged time.Time
}

// Note logs ev, evicted at now from a room whose budget is budget.
func (l *EvictLog) Note(log *slog.Logger, ev Evicted, budget int64, now time.Time) {
	if l.notes == nil {
		l.notes = make(map[string]*evictNote)
	}
	note := l.notes[ev.Room]
	first := note == nil
	if first {
		note = &evictNote{}
		l.notes[ev.Room] = note
	}
	note.n += ev.N
	note.bytes += ev.Bytes
	if !first && now.Sub(note.logged) < evictLogEvery {
		return
	}
	log.Warn("a token's history went over its bytes "+l.Where+": its oldest settled requests were deleted",
		"room", ev.Room[:min(8, len(ev.Room))], "deleted", note.n, "deleted_bytes", note.bytes,
		"kept_bytes", ev.Left, "budget_bytes", budget, "first", first)
	note.n, note.bytes, note.logged = 0, 0, now
}

// Protect names, by room and request ID, records the history budget
// never evicts (besides pending ones): the server's hub gives the records
// it still needs. keep is called during commits, with the database's
// write lock held: it must not wait for the store.
func (s *Store) Protect(keep func(room, id string) bool) {
	s.keep.Store(&keep)
}

func (s *Store) keeper() func(room, id string) bool {
	if p := s.keep.Load(); p != nil {
		return *p
	}
	return nil
}
