package boltfile

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestOpen: a file bbolt refuses is set aside and a new one made, the
// log naming what was lost; one set up fine is opened as it is.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xab}, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	setup := func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("b")); return err })
	}
	db, err := Open(path, "the x file", "what it kept is gone", slog.New(slog.NewTextHandler(&log, nil)), setup)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 || !strings.Contains(log.String(), "the x file is damaged") || !strings.Contains(log.String(), "what it kept is gone") {
		t.Fatalf("set aside %v; log %q", aside, log.String())
	}
	if db, err = Open(path, "the x file", "", nil, setup); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if again, _ := filepath.Glob(path + ".damaged-*"); len(again) != 1 {
		t.Errorf("a sound file was set aside too: %v", again)
	}
}

// TestSafely: a panic in fn is an error.
func TestSafely(t *testing.T) {
	if err := Safely(func() error { panic("invalid page") }); err == nil || !strings.Contains(err.Error(), "invalid page") {
		t.Fatalf("Safely = %v", err)
	}
	want := errors.New("refused")
	if err := Safely(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Safely = %v, want fn's error", err)
	}
}
