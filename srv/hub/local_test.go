package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

func localRecord(room, id string) SharedRecord {
	return SharedRecord{Record: store.Record{Room: room, ID: id, Kind: 1, Text: "q?", Status: store.Pending, CreatedAt: time.Unix(1700000000, 0)}}
}

// applyFunc applies the local records' changes for a test.
type applyFunc func(room string, rec SharedRecord, rev uint64) func()

func (f applyFunc) applyRoom(room string, rec SharedRecord, rev uint64) func() {
	return f(room, rec, rev)
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A saved change of one room is applied while a change of another room is
// still being applied: the rooms do not wait for each other.
func TestLocalRoomsApplyApart(t *testing.T) {
	l := newLocalRecords(openStore(t), "self", Keeps{Retention: time.Minute, MissedFor: time.Minute, MaxSettled: maxSettled, MaxMissed: maxMissed}, time.Now)
	a := "room-a"
	b := ""
	for i := 0; b == ""; i++ {
		if c := fmt.Sprint("room-b", i); l.applyLock(c) != l.applyLock(a) {
			b = c
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	l.apply = applyFunc(func(room string, _ SharedRecord, _ uint64) func() {
		if room == a {
			close(entered)
			<-release
		}
		return nil
	})
	created := make(chan error, 1)
	go func() {
		_, err := l.Create(context.Background(), localRecord(a, "1"))
		created <- err
	}()
	<-entered // room a's change is being applied
	if _, err := l.Create(context.Background(), localRecord(b, "1")); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}

// Under concurrent writers, each room's changes are applied in the order
// of their revisions, each revision once, and a compare-and-set lands
// only over the revision it read.
func TestLocalChangesInRevisionOrder(t *testing.T) {
	l := newLocalRecords(openStore(t), "self", Keeps{Retention: time.Minute, MissedFor: time.Minute, MaxSettled: maxSettled, MaxMissed: maxMissed}, time.Now)
	var mu sync.Mutex
	last := map[string]uint64{}
	seen := map[uint64]bool{}
	var bad []string
	l.apply = applyFunc(func(room string, rec SharedRecord, rev uint64) func() {
		mu.Lock()
		defer mu.Unlock()
		if rev <= last[room] || seen[rev] {
			bad = append(bad, fmt.Sprintf("%s %s at %d after %d", room, rec.ID, rev, last[room]))
		}
		last[room], seen[rev] = rev, true
		return nil
	})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			room := fmt.Sprint("room", w%3)
			for i := range 20 {
				rec := localRecord(room, fmt.Sprint(w, "-", i))
				rev, err := l.Create(context.Background(), rec)
				if err != nil {
					t.Error(err)
					return
				}
				rec.Status = store.Answered
				if _, err := l.Update(context.Background(), rec, rev+1); !errors.Is(err, ErrRecordChanged) {
					t.Errorf("update over a revision it did not read: %v", err)
				}
				if _, err := l.Update(context.Background(), rec, rev); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 || len(seen) != 16*20*2 {
		t.Fatalf("%d changes applied, want %d; out of order: %v", len(seen), 16*20*2, bad)
	}
}

// The records keep at most maxSettled settled requests a room, as the
// room keeps their outcomes, however many were settled within Retention:
// memory stays bounded under a steady load.
func TestLocalSettledBounded(t *testing.T) {
	l := newLocalRecords(nil, "self", Keeps{Retention: time.Hour, MissedFor: time.Hour, MaxSettled: maxSettled, MaxMissed: maxMissed}, time.Now)
	for i := range maxSettled + 10 {
		for _, room := range []string{"a", "b"} {
			rec := localRecord(room, fmt.Sprint(i))
			rev, err := l.Create(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			rec.Status, rec.ClosedAt = store.Answered, time.Now()
			if _, err := l.Update(context.Background(), rec, rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(l.recs); n != 2*maxSettled {
		t.Fatalf("%d records kept, want %d", n, 2*maxSettled)
	}
	if _, _, err := l.Get(context.Background(), "a", "9"); err == nil {
		t.Fatal("the oldest of a full room is still kept")
	}
	if _, _, err := l.Get(context.Background(), "b", fmt.Sprint(maxSettled+9)); err != nil {
		t.Fatalf("the newest is gone: %v", err)
	}
}

// The records keep at most maxMissed answers kept for absent agents a
// room, as the room keeps them, however many came within
// MissedRetention, and the newest.
func TestLocalKeptBounded(t *testing.T) {
	l := newLocalRecords(nil, "self", Keeps{Retention: time.Hour, MissedFor: time.Hour, MaxSettled: maxSettled, MaxMissed: maxMissed}, time.Now)
	for i := range maxMissed + 10 {
		for _, room := range []string{"a", "b"} {
			rec := localRecord(room, fmt.Sprint(i))
			rev, err := l.Create(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			rec.Status, rec.ClosedAt, rec.ClosedNote = store.Answered, time.Now(), ReasonUndelivered
			if _, err := l.Update(context.Background(), rec, rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(l.recs); n != 2*maxMissed {
		t.Fatalf("%d records kept, want %d", n, 2*maxMissed)
	}
	if _, _, err := l.Get(context.Background(), "a", "9"); err == nil {
		t.Fatal("the oldest of a full room is still kept")
	}
	if _, _, err := l.Get(context.Background(), "b", fmt.Sprint(maxMissed+9)); err != nil {
		t.Fatalf("the newest is gone: %v", err)
	}
}
