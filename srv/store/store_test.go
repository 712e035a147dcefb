package store

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func all(t *testing.T, s *Store) (recs []Record) {
	t.Helper()
	if err := s.All(func(r Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// same compares records with times compared as instants.
func same(t *testing.T, got, want Record) {
	t.Helper()
	for _, p := range []struct{ g, w *time.Time }{{&got.CreatedAt, &want.CreatedAt}, {&got.Deadline, &want.Deadline}, {&got.ClosedAt, &want.ClosedAt}} {
		if !p.g.Equal(*p.w) {
			t.Fatalf("time %v, want %v", *p.g, *p.w)
		}
		*p.g, *p.w = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record\n got %+v\nwant %+v", got, want)
	}
}

func sample(room, id string, created time.Time) Record {
	return Record{Room: room, ID: id, Kind: 1, ProjectDirectory: "/src/app", Text: "Ship it? ✓",
		TimeoutSeconds: 600, CreatedAt: created, Deadline: created.Add(10 * time.Minute), Status: Pending}
}

func TestRecordsRoundTripAndSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	pending := sample("r1", "a", t0)
	answered := sample("r1", "b", t0.Add(time.Second))
	answered.Status, answered.Reply, answered.ClosedAt, answered.ClosedNote = Answered, []byte{0, 1, 2, 0xff}, t0.Add(2*time.Second), "by phone"
	zero := Record{Room: "r2", ID: "z", CreatedAt: t0, Status: Cancelled} // zero fields stay zero
	s.Put(pending)
	s.Put(answered)
	s.Put(zero)
	if err := s.Close(); err != nil { // Close commits what is queued
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got := all(t, s)
	if len(got) != 3 {
		t.Fatalf("%d records, want 3", len(got))
	}
	same(t, got[0], pending)
	same(t, got[1], answered)
	same(t, got[2], zero)
}

func TestAnswerInTheSameCommitReplacesThePendingRecord(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	r := sample("r", "q", time.Now())
	done := r
	done.Status, done.ClosedAt = Answered, r.CreatedAt.Add(time.Millisecond)
	if err := s.putAll([]Record{r, done}); err != nil {
		t.Fatal(err)
	}
	got := all(t, s)
	if len(got) != 1 || got[0].Status != Answered {
		t.Fatalf("got %+v, want the one answered record", got)
	}
	// And the other way round, the later record still wins.
	if err := s.putAll([]Record{done, r}); err != nil {
		t.Fatal(err)
	}
	if got := all(t, s); len(got) != 1 || got[0].Status != Pending {
		t.Fatalf("got %+v, want the later (pending) record", got)
	}
}

func TestKeysFollowCreationTime(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	t0 := time.Now()
	// IDs in reverse order of creation: the keys must still sort by time.
	for i := range 20 {
		s.Put(sample("r", fmt.Sprintf("id-%02d", 19-i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	s.Flush()
	got := all(t, s)
	for i := 1; i < len(got); i++ {
		if got[i].CreatedAt.Before(got[i-1].CreatedAt) {
			t.Fatalf("record %d (%s) sorts before an older one", i, got[i].ID)
		}
	}
}

func TestStoresOfTheEarlierLayoutAreUpgraded(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 5, time.UTC)
	old := sample("room", "legacy", t0)
	old.Status, old.Reply, old.ClosedAt = Answered, []byte("reply"), t0.Add(time.Minute)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(requests)
		if err != nil {
			return err
		}
		v, _ := json.Marshal(old)
		if err := b.Put([]byte("room/legacy"), v); err != nil {
			return err
		}
		return b.Put([]byte("room/broken"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the upgrade is done once; opening again changes nothing
		s := open(t, dir)
		got := all(t, s)
		if len(got) != 1 {
			t.Fatalf("%d records, want the legacy one", len(got))
		}
		same(t, got[0], old)
		if err := s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(requests)
			if b.Get([]byte("room/legacy")) != nil {
				return fmt.Errorf("the old key is still there")
			}
			if v := b.Get(old.Key()); len(v) == 0 || v[0] != formatWire {
				return fmt.Errorf("the record is not under its new key in the current format")
			}
			if got := tx.Bucket(meta).Get(layoutKey); string(got) != string(layout) {
				return fmt.Errorf("layout %q recorded, want %q", got, layout)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHistoryClearAndPrune(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		r := sample("r", fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Minute))
		r.Status, r.ClosedAt = Answered, r.CreatedAt.Add(time.Second)
		s.Put(r)
	}
	s.Put(sample("r", "open", t0))
	s.Put(Record{Room: "other", ID: "x", CreatedAt: t0, Status: Answered, ClosedAt: t0})

	page, more, err := s.History("r", time.Now(), 3)
	if err != nil || !more || len(page) != 3 || page[0].ID != "s4" || page[2].ID != "s2" {
		t.Fatalf("first page %v more %v err %v", ids(page), more, err)
	}
	page, more, err = s.History("r", page[2].CreatedAt, 3)
	if err != nil || more || len(page) != 2 || page[0].ID != "s1" {
		t.Fatalf("second page %v more %v err %v", ids(page), more, err)
	}

	// A made-up cursor far in the future or before 1970 is harmless.
	if page, _, err := s.History("r", time.UnixMilli(math.MaxInt64), 10); err != nil || len(page) != 5 {
		t.Fatalf("history before the end of time: %v, %v", ids(page), err)
	}
	if page, _, err := s.History("r", time.UnixMilli(math.MinInt64), 10); err != nil || len(page) != 0 {
		t.Fatalf("history before 1970: %v, %v", ids(page), err)
	}

	if n, err := s.Prune(t0.Add(2*time.Minute + 2*time.Second)); err != nil || n != 4 { // s0, s1, s2 and other/x
		t.Fatalf("pruned %d, %v; want 4", n, err)
	}
	if n, err := s.Clear("r", nil); err != nil || n != 2 {
		t.Fatalf("cleared %d, %v; want 2", n, err)
	}
	if got := all(t, s); len(got) != 1 || got[0].ID != "open" {
		t.Fatalf("left %v, want only the pending request", ids(got))
	}
}

func ids(rs []Record) (out []string) {
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func FuzzDecode(f *testing.F) {
	r := sample("room", "id", time.Unix(1, 2))
	r.Reply, r.ClosedAt = []byte("x"), time.Unix(3, 4)
	f.Add(encode(&r))
	f.Add([]byte(`{"room":"r","id":"i"}`))
	f.Add([]byte{formatWire, 0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if decode(b, &r) != nil || len(b) == 0 || b[0] != formatWire {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		var again Record
		if err := decode(encode(&r), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		same(t, again, r)
	})
}

// Records reach the journal in one append per gather and the database at
// the next fold; a reader (History, Flush) folds at once.
func TestJournalThenFold(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r := sample("r1", "a", t0)
	r.Status, r.ClosedAt = Answered, t0.Add(time.Second)
	s.Put(r)
	journal := filepath.Join(dir, JournalName)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if fi, err := os.Stat(journal); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record never reached the journal")
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(requests).Stats().KeyN != 0 {
			return fmt.Errorf("the record is in the database before a fold")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.History("r1", t0.Add(time.Hour), 10)
	if err != nil || len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("history %v %v", got, err)
	}
	if fi, err := os.Stat(journal); err != nil || fi.Size() != 0 {
		t.Fatalf("the journal was not emptied by the fold: %v %v", fi, err)
	}
	// Without a reader, the fold comes within a second.
	s.Put(sample("r1", "b", t0.Add(time.Minute)))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		_ = s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(requests).Stats().KeyN; return nil })
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fold within seconds")
		}
	}
}

// A journal left by a server that stopped before its fold is put into the
// database on Open, around a damaged entry and up to a torn one.
func TestJournalReplayedOnOpen(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a, b, c := sample("r1", "a", t0), sample("r1", "b", t0.Add(time.Second)), sample("r1", "c", t0.Add(2*time.Second))
	b.Status, b.Reply, b.ClosedAt = Answered, []byte("yes"), t0.Add(3*time.Second)
	var j []byte
	j = journalEntry(j, encode(&a))
	j = journalEntry(j, encode(&b))
	damaged := journalEntry(nil, encode(&c))
	damaged[len(damaged)-1] ^= 0xff
	j = append(j, damaged...)
	j = journalEntry(j, encode(&c)) // after the damaged one: read all the same
	if err := os.WriteFile(filepath.Join(dir, JournalName), j, 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	got := all(t, s)
	if len(got) != 3 {
		t.Fatalf("%d records, want the 3 intact ones", len(got))
	}
	same(t, got[0], a)
	same(t, got[1], b)
	same(t, got[2], c)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn last entry (the write was cut short) is skipped the same way.
	d := sample("r1", "d", t0.Add(time.Hour))
	whole := journalEntry(nil, encode(&d))
	if err := os.WriteFile(filepath.Join(dir, JournalName), whole[:len(whole)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got := all(t, s); len(got) != 3 {
		t.Fatalf("%d records after a torn entry, want 3", len(got))
	}
	if fi, err := os.Stat(filepath.Join(dir, JournalName)); err != nil || fi.Size() != 0 {
		t.Fatalf("journal not emptied on open: %v %v", fi, err)
	}
}
