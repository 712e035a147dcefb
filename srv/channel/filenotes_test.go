package channel

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/boltfile/boltfiletest"
)

// TestFileNotesOutliveTheProcess: what is noted is there when the notes
// are opened again (a restart), but for what is past its time; Create
// makes a key once.
func TestFileNotesOutliveTheProcess(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	ctx := context.Background()
	n, err := OpenFileNotes(dir, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Put(ctx, "telegram.1.42.101", []byte(`{"i":"q1"}`), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := n.Put(ctx, "short", []byte("x"), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.Create(ctx, "told.1", []byte("1"), now.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("first create: %v %v", ok, err)
	}
	if ok, err := n.Create(ctx, "told.1", []byte("2"), now.Add(time.Hour)); ok || err != nil {
		t.Fatalf("second create: %v %v", ok, err)
	}
	if err := n.Put(ctx, "big", make([]byte, MaxNote+1), now.Add(time.Hour)); !errors.Is(err, ErrNoteTooLarge) {
		t.Fatalf("a note over MaxNote: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	now = now.Add(2 * time.Minute)
	n, err = OpenFileNotes(dir, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for key, want := range map[string]string{"telegram.1.42.101": `{"i":"q1"}`, "told.1": "1", "short": "", "big": ""} {
		v, ok, err := n.Get(ctx, key)
		if err != nil || string(v) != want || ok != (want != "") {
			t.Errorf("%s after reopening: %q %v %v, want %q", key, v, ok, err, want)
		}
	}
	if err := n.Delete(ctx, "told.1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := n.Get(ctx, "told.1"); ok {
		t.Error("a deleted note is still there")
	}
	if ok, err := n.Create(ctx, "short", []byte("again"), now.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("create over an expired note: %v %v", ok, err)
	}
}

// TestFileNotesDamaged: a damaged channel-notes.db (junk, or a page of
// its tree overwritten) neither stops the server from starting nor
// crashes it: the file is set aside, for inspection, and a new one kept.
func TestFileNotesDamaged(t *testing.T) {
	ctx := context.Background()
	boltfiletest.Damaged(t, NotesFileName, func(t *testing.T, dir string) {
		n, err := OpenFileNotes(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Put(ctx, "telegram.1.42.101", []byte(`{"i":"q1"}`), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		_ = n.Close()
	}, func(t *testing.T, dir string) {
		n, err := OpenFileNotes(dir, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("a damaged file stops the start: %v", err)
		}
		defer n.Close()
		if err := n.Put(ctx, "told.1", []byte("1"), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := n.Get(ctx, "told.1"); err != nil || !ok || string(v) != "1" {
			t.Errorf("noted %q %v %v, want 1", v, ok, err)
		}
	})
}
