package store

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reading and deleting: readers fold the journal into the database first,
// so they see every record acknowledged.

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
	return s.deleteWhere(nil, func(r Record) bool {
		return r.Status != Pending && r.ClosedAt.Before(cutoff)
	})
}

// History returns the settled records of room created before before,
// newest first, at most limit and HistoryPageBytes of them, and whether
// there are more. Queued records
// are committed first, so a request settled a moment ago is there.
func (s *Store) History(room string, before time.Time, limit int) ([]Record, bool, error) {
	s.Flush()
	var out []Record
	full := false // ended by HistoryPageBytes, with more to come
	prefix := []byte(room + "/")
	// Keys sort by creation time within a room: walk back from before and
	// stop after one more than a page.
	start := appendStamp(append([]byte(nil), prefix...), before)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		var k, v []byte
		if first, _ := c.Seek(start); first == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		var size int64
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) <= limit; k, v = c.Prev() {
			var r Record
			if decode(v, &r) == nil && r.Status != Pending && r.CreatedAt.Before(before) {
				size += r.Bytes()
				if len(out) > 0 && size > HistoryPageBytes {
					// The page is full before its count: this one
					// comes on the next, as the count's extra one does.
					full = true
					break
				}
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
	return out, full, nil
}

// Find returns the record id of room, settled or not: the room's keys
// are walked back from its newest, and only the one that names id is
// decoded (a request looked up this way, a channel's follow-up owed
// since before a restart, is a recent one).
func (s *Store) Find(room, id string) (Record, bool, error) {
	s.Flush()
	prefix := []byte(room + "/")
	suffix := []byte("/" + id)
	// A key is the room, its slash, a 16-digit stamp, a slash and the ID
	// (Record.Key): its length tells an ID from one ending like it.
	size := len(prefix) + 16 + len(suffix)
	var r Record
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		// '0' follows '/': the seek lands just past the room's keys.
		var v []byte
		k, _ := c.Seek(append([]byte(room), '0'))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if len(k) == size && bytes.HasSuffix(k, suffix) {
				found = decode(v, &r) == nil
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return Record{}, false, err
	}
	return r, found, nil
}

// HistoryPageBytes bounds a page of History by the bytes of its records:
// an answer may carry 16 MiB of images and its question 16 MiB of text,
// so a page of 200 could be gigabytes, read and sent as one frame. A
// page ends before a record that would take it past the bound; a record
// larger than the bound comes alone.
const HistoryPageBytes = 8 << 20

// Bytes is what r weighs: its text, choices and answer, images
// included, as the store encodes them. It bounds a history page
// (HistoryPageBytes, one server's and a cluster's) and what a room keeps
// of its settled requests (srv/hub's Keeps).
func (r *Record) Bytes() int64 { return int64(len(r.Text) + len(r.Questions) + len(r.Reply)) }

// Clear deletes the settled records of room but those keep (when not
// nil) says to keep; pending ones stay. Queued records are committed
// first, so none comes back after the clear.
func (s *Store) Clear(room string, keep func(Record) bool) (int, error) {
	return s.deleteWhere([]byte(room+"/"), func(r Record) bool {
		return r.Status != Pending && (keep == nil || !keep(r))
	})
}

// deleteWhere deletes the records under prefix that drop says to, and
// every damaged one, keeping the tally and the manifest in step.
func (s *Store) deleteWhere(prefix []byte, drop func(Record) bool) (int, error) {
	s.Flush()
	s.manMu.Lock()
	defer s.manMu.Unlock()
	var gone []string
	var left counts
	err := s.db.Update(func(tx *bolt.Tx) error {
		t, err := loadTally(tx)
		if err != nil {
			return err
		}
		rt := loadRooms(tx)
		c := tx.Bucket(requests).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if decode(v, &r) == nil && !drop(r) {
				continue
			}
			t.remove(k, v)
			rt.remove(k, v)
			gone = append(gone, string(k))
			if err := c.Delete(); err != nil {
				return err
			}
		}
		left.records = t.n
		if left.deleted, err = addDeleted(tx, len(gone)); err != nil {
			return err
		}
		if err := rt.save(); err != nil {
			return err
		}
		return t.save(tx)
	})
	if err == nil {
		s.noteLocked(nil, gone, left)
	}
	return len(gone), err
}
