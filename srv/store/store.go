// Package store keeps the agents' requests and their answers in an
// embedded database (bbolt: pure Go, one file, transactions, nothing to
// install), so a restart loses neither a pending question nor an answer
// given while the agent was away.
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the database file inside the data directory.
const FileName = "agentassistant.db"

var requests = []byte("requests")

// Status of a stored request.
const (
	Pending   = "pending"
	Answered  = "answered"
	Cancelled = "cancelled"
	TimedOut  = "timeout"
)

// Record is one request and, once it has one, its outcome.
type Record struct {
	// Room is a digest of the token: the token itself is not stored.
	Room             string    `json:"room"`
	ID               string    `json:"id"`
	Kind             int       `json:"kind"`
	ProjectDirectory string    `json:"projectDirectory,omitempty"`
	Text             string    `json:"text"`
	TimeoutSeconds   int64     `json:"timeoutSeconds"`
	CreatedAt        time.Time `json:"createdAt"`
	Deadline         time.Time `json:"deadline"`
	Status           string    `json:"status"`
	// Reply is the answer, protobuf-encoded (McpResultContent list and
	// the rest), when Status is Answered.
	Reply      []byte    `json:"reply,omitempty"`
	ClosedAt   time.Time `json:"closedAt,omitzero"`
	ClosedNote string    `json:"closedNote,omitempty"`
}

// Store is safe for concurrent use.
type Store struct{ db *bolt.DB }

// Options for Open.
type Options struct {
	// Sync makes every change fsync'd before it is acknowledged. Without
	// it a change survives a crash of the server but not of the machine.
	Sync bool
}

// Open opens (creating if needed) the database in dir.
func Open(dir string, o Options) (*Store, error) {
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: !o.Sync})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(requests)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Room returns the room key of a token.
func Room(token string) string {
	d := sha256.Sum256([]byte("agentassistant room\x00" + token))
	return hex.EncodeToString(d[:16])
}

func key(room, id string) []byte { return []byte(room + "/" + id) }

// Put writes r, replacing what was stored under its room and ID.
func (s *Store) Put(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(requests).Put(key(r.Room, r.ID), b)
	})
}

// Get reads one record.
func (s *Store) Get(room, id string) (Record, error) {
	var r Record
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(requests).Get(key(room, id))
		if b == nil {
			return ErrNotFound
		}
		return json.Unmarshal(b, &r)
	})
	return r, err
}

// ErrNotFound is returned by Get.
var ErrNotFound = errors.New("no such request")

// All calls fn for every record, in key order.
func (s *Store) All(fn func(Record) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(requests).ForEach(func(_, v []byte) error {
			var r Record
			if json.Unmarshal(v, &r) == nil {
				return fn(r)
			}
			return nil // a damaged record is skipped, not fatal
		})
	})
}

// Prune deletes settled records closed before cutoff.
func (s *Store) Prune(cutoff time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r Record
			if json.Unmarshal(v, &r) != nil || (r.Status != Pending && r.ClosedAt.Before(cutoff)) {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, err
}

// History returns the settled records of room created before before,
// newest first, at most limit, and whether there are more.
func (s *Store) History(room string, before time.Time, limit int) ([]Record, bool, error) {
	var all []Record
	prefix := []byte(room + "/")
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if json.Unmarshal(v, &r) == nil && r.Status != Pending && r.CreatedAt.Before(before) {
				all = append(all, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

// Clear deletes the settled records of room; pending ones stay.
func (s *Store) Clear(room string) (int, error) {
	n := 0
	prefix := []byte(room + "/")
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(requests).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if json.Unmarshal(v, &r) == nil && r.Status == Pending {
				continue
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
