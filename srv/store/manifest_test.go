package store

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var lostField = regexp.MustCompile(`lost=(\d+) lost_records="([^"]*)"`)

// loggedLost returns the count and keys a log says were lost.
func loggedLost(t *testing.T, log string) (int, []string) {
	t.Helper()
	m := lostField.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the log says nothing of what was lost:\n%s", tail([]byte(log), 20))
	}
	n, _ := strconv.Atoi(m[1])
	return n, strings.Fields(m[2])
}

// A database cut short loses the records on its missing pages, keys and
// all: the log still says how many were lost and names the pending ones,
// which the manifest beside the database kept.
func TestCutDatabaseNamesWhatItLost(t *testing.T) {
	dir := t.TempDir()
	rs := texty(300, 300)
	write(t, dir, rs)
	path := filepath.Join(dir, FileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2/4096*4096); err != nil {
		t.Fatal(err)
	}
	got, log := openInChildLog(t, dir)
	n, named := loggedLost(t, log)
	if want := len(rs) - len(got[0]); n != want || want == 0 {
		t.Fatalf("the log says %d lost; %d of %d were not restored", n, want, len(rs))
	}
	for _, r := range rs {
		if r.Status == Pending && !slices.Contains(got[0], line(r)) && !slices.Contains(named, string(r.Key())) {
			t.Errorf("pending %s was lost and not named", r.ID)
		}
	}
}

// A database gone (deleted, or emptied) is no damage bbolt sees: it makes
// a new one. What the old one held is lost all the same, and said so; the
// pending requests lost are kept for the devices to be told of until they
// are dismissed, across restarts.
func TestMissingDatabaseIsALoss(t *testing.T) {
	for _, how := range []string{"deleted", "emptied"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			rs := texty(6, 10)
			write(t, dir, rs)
			path := filepath.Join(dir, FileName)
			var err error
			if how == "deleted" {
				err = os.Remove(path)
			} else {
				err = os.Truncate(path, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			n, named := loggedLost(t, buf.String())
			var pending []string
			for _, r := range rs {
				if r.Status == Pending {
					pending = append(pending, r.ID)
				}
			}
			if n != len(rs) || len(named) != len(pending) {
				t.Fatalf("the log says %d lost, %d named; want %d, %d:\n%s", n, len(named), len(rs), len(pending), buf.String())
			}
			lost := lostIDs(s.Lost())
			if !slices.Equal(lost, pending) {
				t.Fatalf("Lost = %v, want %v", lost, pending)
			}
			if err := s.Dismiss(rs[0].Room, pending[:1]); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			buf.Reset()
			s, err = Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if lostField.MatchString(buf.String()) {
				t.Errorf("reported lost again:\n%s", buf.String())
			}
			if lost := lostIDs(s.Lost()); !slices.Equal(lost, pending[1:]) {
				t.Fatalf("after a dismissal and a restart, Lost = %v, want %v", lost, pending[1:])
			}
		})
	}
}

func lostIDs(ls []Lost) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.ID)
	}
	slices.Sort(out)
	return out
}
