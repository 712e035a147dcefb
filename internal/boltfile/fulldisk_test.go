package boltfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestFullDiskIsNoDamage: a sound file that cannot be written at start
// because its disk is full (a token's history may fill a small one) is
// no damaged file: Open says why and sets nothing aside, and once space
// is back the file opens with what it kept. Set aside, all it kept was
// lost to a full disk.
func TestFullDiskIsNoDamage(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	path := filepath.Join(dir, "x.db")
	bucket := []byte("b")
	keep := func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err })
	}
	db, err := Open(path, "the x file", "", nil, keep)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 200 {
			if err := tx.Bucket(bucket).Put(fmt.Appendf(nil, "k%03d", i), make([]byte, 1000)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Fill the disk, to its last byte.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, n := range []int{4096, 1024, 256, 64, 16, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	_ = f.Close()

	// What is past its time dropped at start: a write.
	prune := func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucket)
			for i := 0; i < 200; i += 2 {
				if err := b.Delete(fmt.Appendf(nil, "k%03d", i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if db, err := Open(path, "the x file", "", nil, prune); err == nil {
		_ = db.Close()
		t.Log("opened on the full disk")
	} else if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("opened on a full disk: %v, want it to say the disk is full", err)
	}
	if aside, _ := filepath.Glob(path + ".damaged-*"); len(aside) != 0 {
		t.Errorf("a sound file was set aside for a full disk: %v", aside)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, "the x file", "", nil, keep)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	_ = db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucket).Stats().KeyN; return nil })
	if n == 0 {
		t.Errorf("once space was back the file kept nothing")
	}
}
