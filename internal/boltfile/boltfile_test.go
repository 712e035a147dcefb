package boltfile

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/boltfile/boltfiletest"
	bolt "go.etcd.io/bbolt"
)

// TestOpen: a damaged file is set aside and a new one made, the log
// naming what was lost; one set up fine is opened as it is.
func TestOpen(t *testing.T) {
	setup := func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.ForEach(func(_, _ []byte) error { return nil })
		})
	}
	boltfiletest.Damaged(t, "x.db", func(t *testing.T, dir string) {
		db, err := Open(filepath.Join(dir, "x.db"), "the x file", "", nil, setup)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte("k"), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
	}, func(t *testing.T, dir string) {
		path := filepath.Join(dir, "x.db")
		var log strings.Builder
		db, err := Open(path, "the x file", "what it kept is gone", slog.New(slog.NewTextHandler(&log, nil)), setup)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), "the x file is damaged") || !strings.Contains(log.String(), "what it kept is gone") {
			t.Fatalf("log %q", log.String())
		}
		// Sound now: opened as it is, nothing more set aside.
		if db, err = Open(path, "the x file", "", nil, setup); err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
	})
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

// TestPrune: the bucket is made when the file has none; the entries gone
// reports are deleted, the others kept.
func TestPrune(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("b")
	if err := Prune(db, bucket, func(_, _ []byte) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, k := range []string{"keep-1", "old-1", "keep-2", "old-2"} {
			if err := tx.Bucket(bucket).Put([]byte(k), []byte(k[:4])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := Prune(db, bucket, func(_, v []byte) bool { return string(v) == "old-" }); err != nil {
		t.Fatal(err)
	}
	var kept []string
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, _ []byte) error { kept = append(kept, string(k)); return nil })
	})
	if strings.Join(kept, ",") != "keep-1,keep-2" {
		t.Errorf("kept %v, want keep-1 and keep-2", kept)
	}
}
