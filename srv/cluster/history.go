package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The history view in cluster mode (hub.SharedHistory): the settled
// records of the requests bucket are the history, read by every instance
// from the bucket, so every instance shows the same and a clear on one is
// a clear on all. There is no second copy.
//
// A room's records are read by one watch of its keys, r.<room digest>.>
// (a subject filter: no other room's record is read), last value per key,
// in the order of their last writes. The bucket has no index by creation
// time, so a page reads the room's records and keeps the newest limit+1
// created before the page's start (a request's creation time and status
// are read from each value without decoding the rest). One call reads at
// most HistoryScan records, and takes at most the hub's time for one call
// to NATS; a page is at most store.HistoryPageBytes of records, as one
// server's.

// historyDefaultScan is HistoryScan's default.
const historyDefaultScan = 10_000

// roomRecords calls each with every record of room in the requests
// bucket, stopping at the first error it returns.
func (c *Cluster) roomRecords(ctx context.Context, room string, each func(jetstream.KeyValueEntry) error) error {
	return readPresent(ctx, c.reqs, "r."+room+".>", "a room's records", each)
}

// recordHead is what a page's order needs of a record, read without the
// rest (the reply may be large).
type recordHead struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

// newestFirst orders records by creation time, newest first; of two
// created at once, by ID.
func newestFirst(a, b recordHead) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

func headOf(r store.Record) recordHead {
	return recordHead{ID: r.ID, Status: r.Status, CreatedAt: r.CreatedAt}
}

// History returns up to limit settled records of room created before
// before, newest first, and whether older ones exist (hub.SharedHistory).
// As one server's page (store.History), a page ends before a record
// that would take it past store.HistoryPageBytes of questions, choices
// and answers, saying there is more; a record larger than that comes
// alone. A room holding more than HistoryScan records is an error: the
// call would read more than one call may.
func (c *Cluster) History(ctx context.Context, room string, before time.Time, limit int) ([]store.Record, bool, error) {
	limit = max(limit, 0)
	// page is the newest records read so far, newest first: the page
	// and at most one more, which says there is more. Those past it are
	// let go as they are read, so a scan holds at most the page's bytes
	// and one record.
	page := make([]sized, 0, min(limit+1, 256))
	read := 0
	err := c.roomRecords(ctx, room, func(e jetstream.KeyValueEntry) error {
		if read++; read > c.o.HistoryScan {
			return fmt.Errorf("read history: the room holds more than %d records, the most one call reads (history_scan)", c.o.HistoryScan)
		}
		var head recordHead
		if err := json.Unmarshal(e.Value(), &head); err != nil {
			c.log.Error("unreadable request record", "key", e.Key(), "err", err)
			return nil
		}
		if head.Status == store.Pending || !head.CreatedAt.Before(before) {
			return nil
		}
		i, _ := slices.BinarySearchFunc(page, head, func(r sized, h recordHead) int { return newestFirst(headOf(r.Record), h) })
		if i == len(page) && len(page) > c.pageLen(page, limit) {
			return nil // older than the whole page and the one after it
		}
		rec, err := decodeAt(e.Key(), e.Value())
		if err != nil {
			c.log.Error("unreadable request record", "key", e.Key(), "err", err)
			return nil
		}
		page = slices.Insert(page, i, sized{rec.Record, rec.Bytes()})
		if n := c.pageLen(page, limit); len(page) > n+1 {
			clear(page[n+1:]) // let their bytes go
			page = page[:n+1]
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	n := c.pageLen(page, limit)
	out := make([]store.Record, n)
	for i := range out {
		out[i] = page[i].Record
	}
	return out, len(page) > n, nil
}

// sized is a record of a history page and its size (store.Record.Bytes).
type sized struct {
	store.Record
	size int64
}

// pageLen is how many of page, newest first, make a page: at most limit,
// and those within the page's bytes, the first whatever its size.
func (c *Cluster) pageLen(page []sized, limit int) int {
	n, size := 0, int64(0)
	for ; n < len(page) && n < limit; n++ {
		if size += page[n].size; n > 0 && size > c.o.historyBytes {
			break
		}
	}
	return n
}

// ClearHistory deletes the settled records of room but those keep says
// to keep (hub.SharedHistory); pending ones stay. Each is deleted by
// compare-and-set on the revision read: one that changed meanwhile is read
// again, and stays if it is pending or kept now. A clear is not capped by
// HistoryScan: it deletes as it reads, and a clear cut short by its time
// is taken up by the next.
func (c *Cluster) ClearHistory(ctx context.Context, room string, keep func(hub.SharedRecord) bool) (int, error) {
	n := 0
	err := c.roomRecords(ctx, room, func(e jetstream.KeyValueEntry) error {
		value, rev := e.Value(), e.Revision()
		for {
			// An unreadable record is deleted, as in one process.
			if rec, err := decodeAt(e.Key(), value); err == nil && (rec.Status == store.Pending || keep != nil && keep(rec)) {
				return nil
			}
			err := c.reqs.Delete(ctx, e.Key(), jetstream.LastRevision(rev))
			if err == nil {
				n++
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				return fmt.Errorf("delete a request record: %w", err)
			}
			again, err := c.reqs.Get(ctx, e.Key())
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil // deleted meanwhile: another clear
			}
			if err != nil {
				return fmt.Errorf("read a request record: %w", err)
			}
			value, rev = again.Value(), again.Revision()
		}
	})
	return n, err
}
