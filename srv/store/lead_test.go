package store

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// byWhom is a journal that notes which goroutine writes each batch: the
// writer goroutine (its stack holds writeLoop) or a caller.
type byWhom struct {
	JournalFile
	mu      sync.Mutex
	writer  int
	callers int
	fail    error
}

func (j *byWhom) Write(b []byte) (int, error) {
	buf := make([]byte, 16<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	j.mu.Lock()
	if strings.Contains(stack, ".writeLoop(") {
		j.writer++
	} else {
		j.callers++
	}
	err := j.fail
	j.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return j.JournalFile.Write(b)
}

func (j *byWhom) counts() (writer, callers int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.writer, j.callers
}

func openByWhom(t *testing.T, dir string) (*Store, *byWhom) {
	t.Helper()
	var j *byWhom
	s, err := Open(dir, Options{WrapJournal: func(f JournalFile) JournalFile { j = &byWhom{JournalFile: f}; return j }})
	if err != nil {
		t.Fatal(err)
	}
	return s, j
}

// A record staged and waited for is written by the caller that waits,
// not handed to the writer goroutine and back; it is in the journal when
// Wait returns (a copy of the files then has it), and folded into the
// database all the same.
func TestStagedRecordIsWrittenByItsWaiter(t *testing.T) {
	dir := t.TempDir()
	s, j := openByWhom(t, dir)
	defer s.Close()
	rs := texty(20, 10)
	for _, r := range rs {
		if err := s.Stage(r).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if w, c := j.counts(); c != len(rs) || w != 0 {
		t.Fatalf("the writer goroutine wrote %d batches and the callers %d, want the callers all %d", w, c, len(rs))
	}
	crash := crashCopy(t, dir)
	s2 := open(t, crash)
	if got := all(t, s2); len(got) != len(rs) {
		t.Fatalf("a crash after the acks keeps %v, want all %d", ids(got), len(rs))
	}
	_ = s2.Close()
	if got := all(t, s); len(got) != len(rs) {
		t.Fatalf("the store reads %v, want all %d", ids(got), len(rs))
	}
}

// Staged records that no one waits for yet are written by the writer
// goroutine once it is woken for anything (a Put, a reader, Close), in
// order with the rest; Done hands them over as well.
func TestStagedRecordsWithoutAWaiterAreWritten(t *testing.T) {
	dir := t.TempDir()
	s, _ := openByWhom(t, dir)
	rs := texty(4, 10)
	s.Stage(rs[0])
	if got := all(t, s); len(got) != 1 {
		t.Fatalf("a reader sees %v, want the one staged", ids(got))
	}
	a := s.Stage(rs[1])
	<-a.Done()
	if a.Wait() != nil {
		t.Fatal(a.err)
	}
	s.Stage(rs[2])
	if got := all(t, s); len(got) != 3 {
		t.Fatalf("a reader sees %v, want the 3 staged", ids(got))
	}
	s.Stage(rs[3])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got := all(t, s); len(got) != 4 {
		t.Fatalf("after Close: %v, want all 4", ids(got))
	}
}

// Callers that stage and wait, and others that Put, all at once, on the
// same keys: every record is saved, and of each key the last change put
// wins (a request's answer never loses to its question).
func TestLeadsAndTheWriterKeepTheOrder(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const keys, changes = 16, 40
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			r := sample("room", fmt.Sprint("k", k), t0.Add(time.Duration(k)*time.Second))
			for i := range changes {
				r.Text = fmt.Sprint("change ", i)
				switch {
				case i%5 == 4:
					s.Put(r)
				case i%2 == 0:
					if err := s.Stage(r).Wait(); err != nil {
						t.Error(err)
					}
				default:
					if err := s.Put(r).Wait(); err != nil {
						t.Error(err)
					}
				}
				if i%13 == 0 {
					s.Flush()
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got := all(t, s)
	if len(got) != keys {
		t.Fatalf("%d records, want %d", len(got), keys)
	}
	for _, r := range got {
		if r.Text != fmt.Sprint("change ", changes-1) {
			t.Errorf("%s holds %q, want its last change", r.ID, r.Text)
		}
	}
}

// A staged batch the journal cannot take goes straight into the database,
// as the writer's own batches do; the records staged after it follow it.
func TestFailedLeadGoesToTheDatabase(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var heard []error
	var j *byWhom
	s, err := Open(dir, Options{
		WrapJournal: func(f JournalFile) JournalFile { j = &byWhom{JournalFile: f}; return j },
		OnError:     func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := texty(3, 10)
	if err := s.Stage(rs[0]).Wait(); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.fail = syscall.ENOSPC
	j.mu.Unlock()
	if err := s.Stage(rs[1]).Wait(); err != nil {
		t.Fatalf("a batch the database took was refused: %v", err)
	}
	j.mu.Lock()
	j.fail = nil
	j.mu.Unlock()
	if err := s.Stage(rs[2]).Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(heard) != 1 || !errors.Is(heard[0], syscall.ENOSPC) {
		t.Errorf("OnError heard %v, want the journal's ENOSPC", heard)
	}
	mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got := all(t, s); len(got) != 3 {
		t.Fatalf("%v, want all 3", ids(got))
	}
}

// A reader waiting for everything to be folded while a caller's lead is
// appending waits for the lead to finish; it does not wake the writer
// over and over meanwhile (which spun a CPU for as long as the append or
// its fsync took).
func TestFlushWaitsForALeadWithoutSpinning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g *gate
		s, err := Open(t.TempDir(), Options{WrapJournal: func(f JournalFile) JournalFile { g = newGate(f); return g }})
		if err != nil {
			t.Fatal(err)
		}
		wakes, stuck := 0, make(chan struct{})
		testHookWriterWoken = func() {
			if wakes++; wakes > 20 {
				<-stuck // spun: hold the writer still, so the bubble can settle
			}
		}
		defer func() { testHookWriterWoken = nil }()
		rs := texty(2, 10)
		saved := make(chan error, 1)
		a := s.Stage(rs[0])
		go func() { saved <- a.Wait() }()
		<-g.writing // the lead is in its append, which waits at the gate
		flushed := make(chan struct{})
		go func() { s.Flush(); close(flushed) }()
		synctest.Wait()
		if wakes > 20 {
			t.Errorf("the writer was woken %d times while the lead appended", wakes)
		}
		close(stuck)
		close(g.open)
		if err := <-saved; err != nil {
			t.Fatal(err)
		}
		<-flushed
		if got := all(t, s); len(got) != 1 {
			t.Fatalf("after the flush: %v", ids(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Records the database refused for too long are let go from memory, and
// are then in the journal only: a later fold that succeeds must not empty
// the journal, or a crash loses what was acknowledged.
func TestGivenUpRecordsStayInTheJournal(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer func(n int) { holdUnfolded, testHookWrite = n, nil }(holdUnfolded)
	holdUnfolded = 1
	var mu sync.Mutex
	refuse := true
	testHookWrite = func() error {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return syscall.EIO
		}
		return nil
	}
	rs := texty(2, 10)
	if err := s.Stage(rs[0]).Wait(); err != nil {
		t.Fatal(err)
	}
	s.Flush() // the fold fails, and the writer lets the record go
	mu.Lock()
	refuse = false
	mu.Unlock()
	if err := s.Stage(rs[1]).Wait(); err != nil {
		t.Fatal(err)
	}
	s.Flush() // this fold succeeds
	crash := crashCopy(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, crash)
	defer s2.Close()
	if got := all(t, s2); len(got) != 2 {
		t.Fatalf("after a crash: %v, want both acknowledged records", ids(got))
	}
}

// A record a caller's lead appended is waited for by a reader from the
// moment the writer takes it to fold: a Flush in between does not return
// before it is in the database.
func TestFlushWaitsForWhatTheWriterTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir)
		hold := make(chan struct{})
		took := make(chan struct{}, 1)
		testHookWriterTook = func() {
			select {
			case took <- struct{}{}:
				<-hold // the first time: stay between taking and working
			default:
			}
		}
		defer func() { testHookWriterTook = nil }()
		r := texty(1, 10)[0]
		if err := s.Stage(r).Wait(); err != nil { // the lead wakes the writer to arm its fold
			t.Fatal(err)
		}
		<-took
		flushed := make(chan struct{})
		go func() { s.Flush(); close(flushed) }()
		synctest.Wait()
		select {
		case <-flushed:
			t.Error("Flush returned while the writer held the record, not yet in the database")
		default:
		}
		close(hold)
		<-flushed
		if got := all(t, s); len(got) != 1 {
			t.Fatalf("after the flush: %v", ids(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
