package store

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// gate stands between the store and its journal: writes wait until it is
// opened, and can be made to fail.
type gate struct {
	JournalFile
	mu      sync.Mutex
	open    chan struct{} // closed: writes go through
	writing chan struct{} // gets a value when a write waits at the gate
	fail    error
}

func newGate(f JournalFile) *gate {
	return &gate{JournalFile: f, open: make(chan struct{}), writing: make(chan struct{}, 16)}
}

func (g *gate) Write(b []byte) (int, error) {
	g.writing <- struct{}{}
	<-g.open
	g.mu.Lock()
	err := g.fail
	g.mu.Unlock()
	if err != nil {
		n, _ := g.JournalFile.Write(b[:len(b)/2]) // a torn write, as a full disk makes
		return n, err
	}
	return g.JournalFile.Write(b)
}

// A record is acknowledged once it is in the journal, not before.
func TestAckWaitsForTheJournal(t *testing.T) {
	dir := t.TempDir()
	var g *gate
	s, err := Open(dir, Options{WrapJournal: func(f JournalFile) JournalFile { g = newGate(f); return g }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := texty(1, 10)[0]
	ack := s.Put(r)
	<-g.writing
	select {
	case <-ack.Done():
		t.Fatal("acknowledged while its write had not happened")
	default:
	}
	close(g.open)
	if err := ack.Wait(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readJournal(b); len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("journal after the ack holds %v", ids(got))
	}
}

// When the journal cannot take a batch, the batch goes straight into the
// database; the torn bytes of the failed write are cut off again, and
// the error is reported through OnError (set before the writer starts:
// there is no field to assign afterwards, so no race).
func TestFailedJournalWriteGoesToTheDatabase(t *testing.T) {
	dir := t.TempDir()
	var g *gate
	var mu sync.Mutex
	var heard []error
	s, err := Open(dir, Options{
		WrapJournal: func(f JournalFile) JournalFile { g = newGate(f); return g },
		OnError:     func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := texty(3, 10)
	close(g.open)
	if err := s.Put(rs[0]).Wait(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.fail = syscall.ENOSPC
	g.mu.Unlock()
	if err := s.Put(rs[1]).Wait(); err != nil {
		t.Fatalf("a batch the database took was refused: %v", err)
	}
	g.mu.Lock()
	g.fail = nil
	g.mu.Unlock()
	if err := s.Put(rs[2]).Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(heard) != 1 || !errors.Is(heard[0], syscall.ENOSPC) {
		t.Errorf("OnError heard %v, want the journal's ENOSPC", heard)
	}
	mu.Unlock()
	b, err := os.ReadFile(filepath.Join(dir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	// The fold emptied the journal; what follows is whole.
	if got, bad := readJournal(b); len(bad) != 0 || len(got) != 1 || got[0].ID != rs[2].ID {
		t.Fatalf("journal holds %v and %d unreadable ranges, want %s alone", ids(got), len(bad), rs[2].ID)
	}
	// A crash now: a copy of the files as they are, opened elsewhere,
	// has everything acknowledged.
	crash := crashCopy(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, crash)
	defer s2.Close()
	if got := all(t, s2); len(got) != 3 {
		t.Fatalf("after a crash: %v, want all 3", ids(got))
	}
}

// crashCopy copies the store's files in dir as they are now, as a crash
// would leave them, to a new directory, and returns it.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	crash := t.TempDir()
	for _, name := range []string{FileName, JournalName} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crash, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return crash
}
