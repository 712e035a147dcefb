// Package boltfile opens the server's bbolt files safely: bbolt panics,
// or faults on a memory-mapped page, when it reads a damaged file. The
// small files beside the request store (the channels' notes, the ended
// /mcp sessions) keep what helps and is not worth a server that will not
// start: one found damaged is set aside and made anew (Open).
package boltfile

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Safely runs fn, turning a panic or a fault on a memory-mapped page into
// an error, for what bbolt does on this goroutine.
func Safely(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the database is damaged: %v", p)
		}
	}()
	return fn()
}

// SetAside renames the file at path to path.damaged-TIME (and a number,
// should that be taken) and returns the new name.
func SetAside(path string) (string, error) {
	base := path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) { // #nosec G703 -- beside our own file
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, name); err != nil { // #nosec G703 -- as above
		return "", fmt.Errorf("set aside: %w", err)
	}
	return name, nil
}

// Open opens (or creates) the bbolt file at path, mode 0600, and runs
// setup on it (its buckets made, what is past its time dropped): setup
// reads every page a later read would. A file damaged (bbolt refuses it,
// or panics or faults in it, opening it or in setup) is set aside, log
// says so and what is lost (lost), and a new one is made; a file another
// process holds, or one the system will not let be read or written (the
// disk full, no permission: an error of the system's, syscall.Errno), is
// an error, the file kept as it is. what names the file in errors.
func Open(path, what, lost string, log *slog.Logger, setup func(*bolt.DB) error) (*bolt.DB, error) {
	db, err := open(path, setup)
	var refused syscall.Errno
	if err != nil && !errors.Is(err, berrors.ErrTimeout) && !errors.As(err, &refused) {
		aside, serr := SetAside(path)
		if serr != nil {
			return nil, fmt.Errorf("%s: %w; and it could not be %w: move it out of the way", what, err, serr)
		}
		opt.Logger(&log)
		log.Warn(what+" is damaged: set aside, and a new one made; "+lost, "err", err, "file", aside)
		db, err = open(path, setup)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return db, nil
}

func open(path string, setup func(*bolt.DB) error) (db *bolt.DB, err error) {
	err = Safely(func() error {
		var err error
		if db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second}); err != nil {
			return err
		}
		return setup(db)
	})
	if err != nil && db != nil {
		_ = Safely(db.Close)
		db = nil
	}
	return db, err
}

// Prune makes bucket in db and deletes from it the entries gone reports:
// the setup (Open) of a file whose entries expire, which reads every
// page a later read would.
func Prune(db *bolt.DB, bucket []byte, gone func(k, v []byte) bool) error {
	return db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		var old [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			if gone(k, v) {
				old = append(old, k)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
