package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
)

// roomSizes returns each room's bytes as the store's tally holds them,
// and as its records add up to.
func roomSizes(t *testing.T, s *Store) (tallied, counted map[string]int64) {
	t.Helper()
	s.Flush()
	tallied, counted = map[string]int64{}, map[string]int64{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(roomsBucket)
		if b == nil {
			return fmt.Errorf("no %s bucket", roomsBucket)
		}
		if err := b.ForEach(func(k, v []byte) error {
			tallied[string(k)] = int64(binary.LittleEndian.Uint64(v))
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(requests).ForEach(func(k, v []byte) error {
			counted[string(roomOf(k))] += int64(len(k) + len(v))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return tallied, counted
}

func checkTally(t *testing.T, s *Store, when string) map[string]int64 {
	t.Helper()
	tallied, counted := roomSizes(t, s)
	if fmt.Sprint(tallied) != fmt.Sprint(counted) {
		t.Fatalf("%s: the rooms' tally is %v, their records add up to %v", when, tallied, counted)
	}
	return counted
}

// answered is an answered record of room with an answer of size bytes.
func answered(room, id string, at time.Time, size int) Record {
	r := sample(room, id, at)
	r.Status, r.ClosedAt, r.Reply = Answered, at.Add(time.Second), bytes.Repeat([]byte{'x'}, size)
	return r
}

func roomIDs(t *testing.T, s *Store, room string) []string {
	t.Helper()
	var out []string
	for _, r := range all(t, s) {
		if r.Room == room {
			out = append(out, r.ID)
		}
	}
	return out
}

// The tally of each room's bytes follows every write, replacement, clear
// and prune, and is there again after a restart.
func TestRoomTallyFollowsTheRecords(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	t0 := time.Now().Add(-time.Hour)
	for i := range 20 {
		room := []string{"a", "b"}[i%2]
		r := sample(room, fmt.Sprint("q", i), t0.Add(time.Duration(i)*time.Second))
		s.Put(r)
		if i%3 == 0 { // answered: the same key again, larger
			s.Put(answered(room, r.ID, r.CreatedAt, 1000+i))
		}
	}
	sizes := checkTally(t, s, "after writes")
	if sizes["a"] == 0 || sizes["b"] == 0 {
		t.Fatalf("rooms %v: want both counted", sizes)
	}
	if _, err := s.Clear("b", nil); err != nil {
		t.Fatal(err)
	}
	checkTally(t, s, "after a clear")
	if _, err := s.Prune(time.Now()); err != nil {
		t.Fatal(err)
	}
	checkTally(t, s, "after a prune")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkTally(t, s, "after a restart")
	if strings.Contains(logged.String(), "counted afresh") {
		t.Errorf("a tally kept right was counted afresh:\n%s", logged.String())
	}
}

// Open counts the rooms afresh when their tally is missing (a store
// written before it) or wrong, and says so when it was wrong.
func TestRoomTallyCountedAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	t0 := time.Now().Add(-time.Hour)
	for i := range 6 {
		s.Put(answered("a", fmt.Sprint("q", i), t0.Add(time.Duration(i)*time.Second), 500))
	}
	want := checkTally(t, s, "after writes")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*bolt.Tx) error
		said   bool
	}{
		{"missing", func(tx *bolt.Tx) error { return tx.DeleteBucket(roomsBucket) }, false},
		{"wrong", func(tx *bolt.Tx) error {
			return tx.Bucket(roomsBucket).Put([]byte("a"), binary.LittleEndian.AppendUint64(nil, 7))
		}, true},
		{"a room too many", func(tx *bolt.Tx) error {
			return tx.Bucket(roomsBucket).Put([]byte("ghost"), binary.LittleEndian.AppendUint64(nil, 7))
		}, true},
	} {
		db, err := bolt.Open(dir+"/"+FileName, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(c.change); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if got := checkTally(t, s, c.name); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: rooms %v after open, want %v", c.name, got, want)
		}
		if said := strings.Contains(logged.String(), "counted afresh"); said != c.said {
			t.Errorf("%s: said it counted afresh: %v, want %v:\n%s", c.name, said, c.said, logged.String())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Past a room's budget its oldest settled records go, not its pending
// ones, nor those the keep function names, nor the record just written,
// nor another room's; the eviction is logged once, by the room's digest,
// with counts.
func TestHistoryBudgetEvictsOldestSettledFirst(t *testing.T) {
	var logged syncBuffer
	const budget = 64 << 10
	s, err := Open(t.TempDir(), Options{HistoryBytes: budget, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Protect(func(room, id string) bool { return room == "a" && id == "kept" })
	t0 := time.Now().Add(-time.Hour)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	const each = 10 << 10
	s.Put(sample("a", "pending", at(0)))
	s.Put(answered("a", "kept", at(1), each))
	for i := range 3 {
		s.Put(answered("b", fmt.Sprint("b", i), at(2+i), each))
	}
	for i := range 12 {
		if err := s.Put(answered("a", fmt.Sprint("s", i), at(10+i), each)).Wait(); err != nil {
			t.Fatal(err)
		}
		s.Flush() // each its own commit, as answers given apart are
	}
	sizes := checkTally(t, s, "after evictions")
	if sizes["a"] > budget {
		t.Errorf("room a holds %d bytes, past its budget of %d", sizes["a"], budget)
	}
	got := roomIDs(t, s, "a")
	// 64 KiB holds six records of 10 KiB and a small one: the pending
	// one and the kept one stay, with five of the newest settled.
	want := []string{"pending", "kept", "s7", "s8", "s9", "s10", "s11"}
	if !slices.Equal(got, want) {
		t.Errorf("room a keeps %v, want %v", got, want)
	}
	if got := roomIDs(t, s, "b"); !slices.Equal(got, []string{"b0", "b1", "b2"}) {
		t.Errorf("room b keeps %v, want all three", got)
	}
	lines := logged.lines("history went over")
	if len(lines) != 1 {
		t.Fatalf("evictions logged %d times, want once:\n%s", len(lines), logged.String())
	}
	for _, w := range []string{"room=a ", "deleted=1 ", "first=true"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("the eviction's log lacks %q: %s", w, lines[0])
		}
	}

	// One record larger than the budget stays, alone but for what is kept.
	if err := s.Put(answered("a", "huge", at(100), budget+1)).Wait(); err != nil {
		t.Fatal(err)
	}
	if got := roomIDs(t, s, "a"); !slices.Equal(got, []string{"pending", "kept", "huge"}) {
		t.Errorf("after a record past the budget room a keeps %v, want pending, kept, huge", got)
	}
	checkTally(t, s, "after the huge one")
}

// A request's ID is the agent's to choose, slashes and all: the record
// of "build/42" that keep names is kept, and keep is never asked of
// the ID's last part alone ("42", which another request may have).
func TestHistoryBudgetKeepsAnIDWithSlashes(t *testing.T) {
	const budget = 32 << 10
	s, err := Open(t.TempDir(), Options{HistoryBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var asked sync.Map
	s.Protect(func(room, id string) bool {
		asked.Store(id, true)
		return room == "a" && id == "build/42"
	})
	t0 := time.Now().Add(-time.Hour)
	const each = 10 << 10
	s.Put(answered("a", "build/42", t0, each))
	for i := range 6 {
		if err := s.Put(answered("a", fmt.Sprint("s", i), t0.Add(time.Duration(1+i)*time.Second), each)).Wait(); err != nil {
			t.Fatal(err)
		}
		s.Flush()
	}
	if got := roomIDs(t, s, "a"); !slices.Contains(got, "build/42") {
		t.Errorf("room a keeps %v: the kept build/42 was evicted", got)
	}
	if _, ok := asked.Load("42"); ok {
		t.Error("keep was asked of 42, the last part of build/42")
	}
	checkTally(t, s, "after evictions")
}

// The budget holds across a restart: the tally read back goes on, and
// the first commit after it evicts what the last run left over budget.
func TestHistoryBudgetAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	const each = 10 << 10
	t0 := time.Now().Add(-time.Hour)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	s := open(t, dir) // no budget yet: 10 records of 10 KiB
	for i := range 10 {
		s.Put(answered("a", fmt.Sprint("s", i), at(i), each))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const budget = 48 << 10
	s, err := Open(dir, Options{HistoryBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	if got := roomIDs(t, s, "a"); len(got) != 10 {
		t.Fatalf("opening with a budget evicted: room keeps %v", got)
	}
	if err := s.Put(answered("a", "new", at(50), each)).Wait(); err != nil {
		t.Fatal(err)
	}
	if got := roomIDs(t, s, "a"); !slices.Equal(got, []string{"s7", "s8", "s9", "new"}) {
		t.Errorf("after a restart and a write room a keeps %v, want s7 s8 s9 new", got)
	}
	checkTally(t, s, "after the restart's eviction")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{HistoryBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sizes := checkTally(t, s, "reopened"); sizes["a"] > budget {
		t.Errorf("room a holds %d bytes after reopening, past %d", sizes["a"], budget)
	}
}

const budgetChildEnv = "AGENTASSISTANT_STORE_BUDGET_CHILD_DIR"

// TestBudgetInChild is the child of TestHistoryBudgetSurvivesKill: it
// writes large answers to one room, past its budget, until killed,
// printing each one acknowledged.
func TestBudgetInChild(t *testing.T) {
	dir := os.Getenv(budgetChildEnv)
	if dir == "" {
		t.Skip("run by TestHistoryBudgetSurvivesKill")
	}
	s, err := Open(dir, Options{HistoryBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	for i := 0; ; i++ {
		r := answered("a", fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Millisecond), 20<<10)
		if err := s.Put(r).Wait(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ACKED %d\n", i)
	}
}

// A server killed (SIGKILL) while it evicts leaves the tally and the
// records in step: both are in the same transactions.
func TestHistoryBudgetSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBudgetInChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), budgetChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once it has written many times its budget: well into
	// evicting, at whatever point of a commit it is.
	sc := bufio.NewScanner(out)
	acked := 0
	for sc.Scan() && acked < 200 {
		if _, err := fmt.Sscanf(sc.Text(), "ACKED %d", &acked); err == nil {
			acked++
		}
	}
	if acked < 200 {
		t.Fatalf("the child stopped after %d answers", acked)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var logged bytes.Buffer
	s, err := Open(dir, Options{HistoryBytes: 256 << 10, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if strings.Contains(logged.String(), "counted afresh") || strings.Contains(logged.String(), "lost") {
		t.Errorf("after a kill the store found its tally or records wrong:\n%s", logged.String())
	}
	checkTally(t, s, "after a kill")
	got := roomIDs(t, s, "a")
	if !slices.Contains(got, fmt.Sprint("s", acked-1)) {
		t.Errorf("the last acknowledged answer s%d is not kept: %v", acked-1, got)
	}
}

// syncBuffer is a log destination safe for the writer goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *syncBuffer) lines(has string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		if strings.Contains(l, has) {
			out = append(out, l)
		}
	}
	return out
}

// A crash between a commit that evicted and the manifest's write after
// it leaves a manifest that counts more records than the database holds:
// those were deleted on purpose, not lost, and Open does not say they
// were.
func TestEvictionIsNotLossAfterACrash(t *testing.T) {
	dir := t.TempDir()
	const budget = 64 << 10
	s, err := Open(dir, Options{HistoryBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		s.Put(answered("a", fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Second), 10<<10))
	}
	s.Flush()
	before, err := os.ReadFile(dir + "/" + ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	// Past the budget alone: the five go, one comes.
	if err := s.Put(answered("a", "huge", t0.Add(time.Minute), budget)).Wait(); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	if got := roomIDs(t, s, "a"); !slices.Equal(got, []string{"huge"}) {
		t.Fatalf("room a keeps %v, want only huge", got)
	}
	crash := crashCopy(t, dir)
	if err := os.WriteFile(crash+"/"+ManifestName, before, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	c, err := Open(crash, Options{HistoryBytes: budget, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if strings.Contains(logged.String(), "lost") {
		t.Errorf("records evicted before a crash were reported lost:\n%s", logged.String())
	}
}

// One commit writing many records to a room (a fold of the journal holds
// all the writes of up to a second) keeps the room within its budget
// too: only the last it writes is spared.
func TestHistoryBudgetWithinOneCommit(t *testing.T) {
	const budget = 64 << 10
	s, err := Open(t.TempDir(), Options{HistoryBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	var rs []Record
	for i := range 20 {
		rs = append(rs, answered("a", fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Second), 10<<10))
	}
	if err := s.putAll(rs); err != nil {
		t.Fatal(err)
	}
	if sizes := checkTally(t, s, "after one commit"); sizes["a"] > budget {
		t.Errorf("room a holds %d bytes, past %d", sizes["a"], budget)
	}
	if got := roomIDs(t, s, "a"); !slices.Equal(got, []string{"s14", "s15", "s16", "s17", "s18", "s19"}) {
		t.Errorf("room a keeps %v, want the newest six", got)
	}
}

// A room kept at its budget by a loop logs its evictions once, then at
// most once per evictLogEvery, with what was evicted since.
func TestEvictionLogIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged syncBuffer
		const budget = 32 << 10
		s, err := Open(t.TempDir(), Options{HistoryBytes: budget, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		t0 := time.Now().Add(-time.Hour)
		n := 0
		answer := func(room string) {
			t.Helper()
			if err := s.Put(answered(room, fmt.Sprint("s", n), t0.Add(time.Duration(n)*time.Second), 10<<10)).Wait(); err != nil {
				t.Fatal(err)
			}
			s.Flush()
			n++
		}
		for range 10 { // three fit; seven evicted
			answer("a")
		}
		if got := logged.lines("history went over"); len(got) != 1 || !strings.Contains(got[0], "deleted=1 ") {
			t.Fatalf("the first eviction logged as %q, want once, one deleted", got)
		}
		time.Sleep(evictLogEvery - time.Second)
		answer("a")
		if got := logged.lines("history went over"); len(got) != 1 {
			t.Fatalf("evictions within the hour logged %d times, want once", len(got))
		}
		answer("b") // another room: its own first
		for range 4 {
			answer("b")
		}
		if got := logged.lines("room=b "); len(got) != 1 {
			t.Fatalf("room b's first eviction logged %d times, want once", len(got))
		}
		time.Sleep(time.Second)
		answer("a")
		got := logged.lines("room=a ")
		if len(got) != 2 || !strings.Contains(got[1], "deleted=8 ") || !strings.Contains(got[1], "first=false") {
			t.Fatalf("room a after an hour: %q, want a second line with the eight since", got)
		}
	})
}
