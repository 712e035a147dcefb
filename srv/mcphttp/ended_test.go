package mcphttp

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/boltfile/boltfiletest"
)

// TestFileEndedBounded: the ended IDs kept on disk are a room's latest
// perRoom, none older than EndedAge, and they are read again after the
// file is opened anew.
func TestFileEndedBounded(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	f, err := OpenFileEnded(dir, 3, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sha256.Sum256([]byte("token-a")), sha256.Sum256([]byte("token-b"))
	for i := range 5 {
		now = now.Add(time.Second)
		if err := f.Keep(a, fmt.Sprint("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Keep(b, "b0"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ids := func(f *FileEnded) []string {
		all, err := f.All()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range all {
			out = append(out, e.Session)
		}
		slices.Sort(out)
		return out
	}
	if f, err = OpenFileEnded(dir, 3, clock, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(f), []string{"a2", "a3", "a4", "b0"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want a room's latest 3: %v", got, want)
	}
	f.Close()

	now = now.Add(EndedAge + time.Second)
	if f, err = OpenFileEnded(dir, 3, clock, nil); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := ids(f); len(got) != 0 {
		t.Errorf("kept %v past EndedAge, want none", got)
	}
}

// TestFileEndedDamaged: a damaged mcp-ended.db (junk, or a page of its
// tree overwritten) neither stops the server from starting nor crashes
// it: the file is set aside, for inspection, and a new one kept.
func TestFileEndedDamaged(t *testing.T) {
	room := sha256.Sum256([]byte("token"))
	boltfiletest.Damaged(t, EndedFileName, func(t *testing.T, dir string) {
		f, err := OpenFileEnded(dir, 3, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Keep(room, "s0"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}, func(t *testing.T, dir string) {
		f, err := OpenFileEnded(dir, 3, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("a damaged file stops the start: %v", err)
		}
		defer f.Close()
		if err := f.Keep(room, "s1"); err != nil {
			t.Fatal(err)
		}
		if all, err := f.All(); err != nil || len(all) != 1 || all[0].Session != "s1" {
			t.Errorf("kept %v (%v), want s1 alone", all, err)
		}
	})
}
