package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lostField is the count and keys of what a log says was lost: the keys
// quoted, or not when there is one.
var lostField = regexp.MustCompile(`lost=(\d+) lost_records=("[^"]*"|\S*)`)

// loggedLost returns the count and keys a log says were lost.
func loggedLost(t *testing.T, log string) (int, []string) {
	t.Helper()
	m := lostField.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the log says nothing of what was lost:\n%s", tail([]byte(log), 20))
	}
	n, _ := strconv.Atoi(m[1])
	return n, strings.Fields(strings.Trim(m[2], `"`))
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

// A small store, its pending records folded at once or a few at a time
// (bbolt puts them on other pages each way), is cut here and there, as
// the server left it when killed: each pending record is restored
// from the pages left, or named lost, and the log counts as lost just
// those not restored. Nothing is called safe that is gone unsaid.
func TestEveryCutRestoresOrNamesEachPending(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, folds := range [][]int{{3}, {1, 2}, {2, 1}, {1, 1, 1}} {
		for _, prune := range []bool{false, true} { // the server prunes at start: one commit more
			t.Run(fmt.Sprintf("%v,prune=%v", folds, prune), func(t *testing.T) {
				dir := t.TempDir()
				s := open(t, dir)
				if prune {
					if _, err := s.Prune(t0); err != nil {
						t.Fatal(err)
					}
				}
				var rs []Record
				for _, n := range folds {
					for range n {
						rs = append(rs, sample(strings.Repeat("ab", 32), fmt.Sprintf("q%d", len(rs)), t0.Add(time.Duration(len(rs))*time.Second)))
						s.Put(rs[len(rs)-1])
					}
					s.Flush()
				}
				files := map[string][]byte{}
				for _, name := range []string{FileName, JournalName, ManifestName} {
					b, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					files[name] = b
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				var dirs []string
				var cuts []int
				for cut := 0; cut < len(files[FileName]); cut += 1000 {
					cuts = append(cuts, cut, cut/4096*4096) // within a page, here and there, and at its start
				}
				slices.Sort(cuts)
				cuts = slices.Compact(cuts)
				for _, cut := range cuts {
					crash := t.TempDir()
					for name, b := range files {
						if name == FileName {
							b = b[:cut]
						}
						if err := os.WriteFile(filepath.Join(crash, name), b, 0o600); err != nil {
							t.Fatal(err)
						}
					}
					dirs = append(dirs, crash)
				}
				got, log := openInChildLog(t, dirs...)
				opens := strings.Split(log, "OPENING ")[1:]
				for i := range dirs {
					n, named := 0, []string(nil) // a cut past the pages in use loses nothing, and says nothing
					if m := lostField.FindStringSubmatch(opens[i]); m != nil {
						n, _ = strconv.Atoi(m[1])
						named = strings.Fields(strings.Trim(m[2], `"`))
					}
					restored := 0
					for _, r := range rs {
						switch {
						case slices.Contains(got[i], line(r)):
							restored++
						case !slices.Contains(named, string(r.Key())):
							t.Errorf("cut at %d bytes: %s was neither restored nor named lost:\n%s", cuts[i], r.ID, opens[i])
						}
					}
					if n != len(rs)-restored {
						t.Errorf("cut at %d bytes: the log says %d lost, %d of %d were not restored:\n%s", cuts[i], n, len(rs)-restored, len(rs), opens[i])
					}
				}
			})
		}
	}
}
