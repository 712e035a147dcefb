package channel

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/boltfile"
	"github.com/agentassistant/agentassistant/internal/opt"
	bolt "go.etcd.io/bbolt"
)

// FileNotes are the notes of one process kept in its data directory, so
// that a restart, a kill -9 included, forgets no message it sent: a
// reply to a question's Telegram or Slack message, or to its e-mail,
// made before the restart still finds the question after it, and one
// read again (a Telegram update not yet confirmed when the server died,
// a mail not yet marked read) is told from another by what its note
// says. Each change is on disk when it returns (a bbolt commit).
type FileNotes struct {
	db  *bolt.DB
	now func() time.Time
	// puts counts the writes: every pruneEvery-th prunes, so that a
	// server running for weeks keeps about a week's notes.
	puts atomic.Uint64
}

const pruneEvery = 1024

// NotesFileName is the notes' file in the data directory.
const NotesFileName = "channel-notes.db"

var notesBucket = []byte("notes")

// OpenFileNotes opens (or creates) the notes in dir, dropping those past
// their time; now is the clock (nil: time.Now). A damaged file is set
// aside and a new one made, as log says (boltfile.Open). Close closes
// them.
func OpenFileNotes(dir string, now func() time.Time, log *slog.Logger) (*FileNotes, error) {
	opt.Clock(&now)
	n := &FileNotes{now: now}
	db, err := boltfile.Open(filepath.Join(dir, NotesFileName), "the channels' notes",
		"the messages sent before are no longer edited once their questions are settled", log,
		func(db *bolt.DB) error { n.db = db; return n.prune() })
	if err != nil {
		return nil, err
	}
	n.db = db
	return n, nil
}

// Close closes the file. Idempotent.
func (n *FileNotes) Close() error { return n.db.Close() }

// oneProcess: a note missing is missing for good (no other instance
// writes them).
func (*FileNotes) oneProcess() {}

// prune drops the notes past their time: a note lives a week at most,
// so the file holds about a week's messages.
func (n *FileNotes) prune() error {
	now := n.now()
	if err := boltfile.Prune(n.db, notesBucket, func(_, v []byte) bool { _, ok := live(v, now); return !ok }); err != nil {
		return fmt.Errorf("prune the channels' notes: %w", err)
	}
	return nil
}

// A stored note is its time (Unix nanoseconds, 8 bytes) then its value.
func stored(value []byte, until time.Time) []byte {
	b := make([]byte, 8, 8+len(value))
	binary.BigEndian.PutUint64(b, uint64(until.UnixNano()))
	return append(b, value...)
}

// live is the value of a stored note, unless it is past its time (or
// not a note).
func live(v []byte, now time.Time) ([]byte, bool) {
	if len(v) < 8 {
		return nil, false
	}
	if !now.Before(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) { //nolint:gosec // G115: stored wrote it from an int64
		return nil, false
	}
	return v[8:], true
}

// Put keeps value under key until until.
func (n *FileNotes) Put(_ context.Context, key string, value []byte, until time.Time) error {
	if len(value) > MaxNote {
		return ErrNoteTooLarge
	}
	if n.puts.Add(1)%pruneEvery == 0 {
		if err := n.prune(); err != nil {
			return err
		}
	}
	err := n.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(notesBucket).Put([]byte(key), stored(value, until))
	})
	if err != nil {
		return fmt.Errorf("keep a note: %w", err)
	}
	return nil
}

// Get is the value under key, unless it expired.
func (n *FileNotes) Get(_ context.Context, key string) ([]byte, bool, error) {
	var out []byte
	var ok bool
	err := n.db.View(func(tx *bolt.Tx) error {
		var v []byte
		if v, ok = live(tx.Bucket(notesBucket).Get([]byte(key)), n.now()); ok {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read a note: %w", err)
	}
	return out, ok, nil
}

// Create keeps value under key until until, unless a note is there.
func (n *FileNotes) Create(_ context.Context, key string, value []byte, until time.Time) (bool, error) {
	if len(value) > MaxNote {
		return false, ErrNoteTooLarge
	}
	created := false
	err := n.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(notesBucket)
		if _, ok := live(b.Get([]byte(key)), n.now()); ok {
			return nil
		}
		created = true
		return b.Put([]byte(key), stored(value, until))
	})
	if err != nil {
		return false, fmt.Errorf("keep a note: %w", err)
	}
	return created, nil
}

// Delete forgets key.
func (n *FileNotes) Delete(_ context.Context, key string) error {
	err := n.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(notesBucket).Delete([]byte(key)) })
	if err != nil {
		return fmt.Errorf("forget a note: %w", err)
	}
	return nil
}

// scan lists the values under prefix that are not past their time.
func (n *FileNotes) scan(prefix string) ([][]byte, error) {
	var out [][]byte
	now := n.now()
	err := n.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(notesBucket).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			if val, ok := live(v, now); ok {
				out = append(out, append([]byte(nil), val...))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the channels' notes: %w", err)
	}
	return out, nil
}
