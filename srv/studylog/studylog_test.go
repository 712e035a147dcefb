package studylog

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var day = time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)

// lines reads a log back: every line must be a whole event.
func lines(t *testing.T, dir string, l *Log) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(l.RelPath())))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d is not a whole event: %v", len(out), err)
		}
		out = append(out, e)
	}
	return out
}

func size(t *testing.T, dir string, l *Log) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(l.RelPath())))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFilesPerOwner: an owner makes MaxFilesPerOwner logs, no more;
// another owner has its own; the logs made stay.
func TestFilesPerOwner(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, Options{MaxFilesPerOwner: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l, err := d.Create("tok", day, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(day, In, "agent.message", "m", "", json.RawMessage(`{"text":"hi"}`)); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Create("tok", day, nil); !errors.Is(err, ErrTooManyFiles) {
		t.Fatalf("third log: %v, want ErrTooManyFiles", err)
	}
	if l, err := d.Create("other", day, nil); err != nil {
		t.Fatalf("another owner's log: %v", err)
	} else {
		l.Close()
	}
	entries, _ := os.ReadDir(filepath.Join(dir, RelDir))
	if len(entries) != 3 {
		t.Fatalf("%d files, want 3", len(entries))
	}
}

// TestBytesPerOwner: an owner's logs together never pass
// MaxBytesPerOwner; an event that does not fit is not written at all (no
// partial line), the log takes nothing more but its last line, which
// has room kept for it; a new log needs that room too.
func TestBytesPerOwner(t *testing.T) {
	dir := t.TempDir()
	const max = 8 << 10
	d, err := Open(dir, Options{MaxBytesPerOwner: max})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Create("tok", day, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Create("tok", day, nil) // shares the owner's bytes
	if err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 700)})
	written := 0
	for i := 0; ; i++ {
		l := a
		if i%2 == 1 {
			l = b
		}
		err := l.Append(day, In, "agent.message", "m", "", text)
		if errors.Is(err, ErrFull) {
			if l == b {
				a, b = b, a // a is the full one from here on
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		written++
		if written > max/700 {
			t.Fatal("no bound")
		}
	}
	if err := a.Append(day, In, "agent.message", "small", "", json.RawMessage(`{}`)); !errors.Is(err, ErrFull) {
		t.Fatalf("an event after the log was full: %v", err)
	}
	if err := a.AppendLast(day, Internal, "session.ended", "", "", json.RawMessage(`{"reason":"log_full"}`)); err != nil {
		t.Fatalf("last line: %v", err)
	}
	if err := a.AppendLast(day, Internal, "session.ended", "", "", json.RawMessage(`{}`)); !errors.Is(err, ErrFull) {
		t.Fatalf("a second last line: %v", err)
	}
	if _, err := d.Create("tok", day, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("a new log with no room: %v", err)
	}
	evA, evB := lines(t, dir, a), lines(t, dir, b)
	if got := len(evA) + len(evB); got != written+1 {
		t.Fatalf("%d lines, want %d", got, written+1)
	}
	if last := evA[len(evA)-1]; last.Type != "session.ended" || last.EventIndex != len(evA)-1 {
		t.Fatalf("last line %+v", last)
	}
	if total := size(t, dir, a) + size(t, dir, b); total > max {
		t.Fatalf("%d bytes written, bound %d", total, max)
	}
	// Closed, b gives back its room: the owner's next log may be made,
	// and what was written stays.
	before := size(t, dir, b)
	b.Close()
	a.Close()
	c, err := d.Create("tok", day, nil)
	if err != nil {
		t.Fatalf("a log after the room came back: %v", err)
	}
	c.Close()
	if size(t, dir, b) != before {
		t.Fatal("a written log changed")
	}
}
