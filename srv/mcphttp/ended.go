package mcphttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentassistant/agentassistant/internal/boltfile"
	"github.com/agentassistant/agentassistant/internal/opt"
	bolt "go.etcd.io/bbolt"
)

// Ended keeps the signed IDs of the sessions clients ended (DELETE)
// across a restart of one process: a signed ID is served again after a
// restart, so without them whoever still holds an ended ID (and the
// token) would have its session back. A cluster's instances learn the
// ends from each other's notes instead (peers.go).
type Ended interface {
	// Keep records that the client of sid, in the room of digest, ended
	// it; on disk when it returns.
	Keep(room [sha256.Size]byte, sid string) error
	// All lists what is kept, each room's oldest first.
	All() ([]EndedID, error)
}

// EndedID is one session its client ended.
type EndedID struct {
	Room    [sha256.Size]byte
	Session string
}

// EndedFileName is the file, in the data directory, of the ended IDs.
const EndedFileName = "mcp-ended.db"

// EndedAge is how long an ended ID is kept on disk: as long as a
// cluster's instances keep the note of a session's end.
const EndedAge = 24 * time.Hour

var endedBucket = []byte("ended")

// FileEnded keeps the ended IDs in a bbolt file: each room's latest
// perRoom (as the room's table keeps them in memory, MaxSessions), none
// older than EndedAge. A key is the room's digest, the time it ended
// (Unix nanoseconds, big-endian) and the ID; so a room's are together,
// oldest first.
type FileEnded struct {
	db      *bolt.DB
	now     func() time.Time
	perRoom int
}

// OpenFileEnded opens (or creates) the ended IDs in dir, keeping perRoom
// of a room (0: 64, the default MaxSessions), dropping those past
// EndedAge; now is the clock (nil: time.Now). A damaged file is set
// aside (EndedFileName.damaged-TIME) and a new one made, as log says:
// what it kept only keeps ended sessions from being served again, which
// is not worth a server that will not start. Close closes the file.
func OpenFileEnded(dir string, perRoom int, now func() time.Time, log *slog.Logger) (*FileEnded, error) {
	opt.Clock(&now)
	opt.Default(&perRoom, defaultMaxSessions)
	f := &FileEnded{now: now, perRoom: perRoom}
	db, err := boltfile.Open(filepath.Join(dir, EndedFileName), "the ended /mcp sessions' file",
		"the sessions their clients ended before are served again", log, f.prune)
	if err != nil {
		return nil, err
	}
	f.db = db
	return f, nil
}

// prune drops the IDs past EndedAge.
func (f *FileEnded) prune(db *bolt.DB) error {
	return boltfile.Prune(db, endedBucket, func(k, _ []byte) bool { return f.old(k) })
}

// Close closes the file.
func (f *FileEnded) Close() error { return f.db.Close() }

// old reports whether the ID under k ended more than EndedAge ago (or k
// is none of ours).
func (f *FileEnded) old(k []byte) bool {
	if len(k) < sha256.Size+8 {
		return true
	}
	at := time.Unix(0, int64(binary.BigEndian.Uint64(k[sha256.Size:]))) //nolint:gosec // G115: Keep wrote it from an int64
	return f.now().Sub(at) > EndedAge
}

// Keep records sid as ended, and drops the room's oldest past perRoom.
func (f *FileEnded) Keep(room [sha256.Size]byte, sid string) error {
	k := make([]byte, 0, sha256.Size+8+len(sid))
	k = binary.BigEndian.AppendUint64(append(k, room[:]...), uint64(f.now().UnixNano())) //nolint:gosec // G115: a time after 1970
	k = append(k, sid...)
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(endedBucket)
		if err := b.Put(k, nil); err != nil {
			return err
		}
		var keys [][]byte
		c := b.Cursor()
		for ck, _ := c.Seek(room[:]); ck != nil && bytes.HasPrefix(ck, room[:]); ck, _ = c.Next() {
			keys = append(keys, ck)
		}
		n := len(keys)
		for _, ck := range keys {
			if n <= f.perRoom && !f.old(ck) {
				break
			}
			if err := b.Delete(ck); err != nil {
				return err
			}
			n--
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("keep an ended /mcp session: %w", err)
	}
	return nil
}

// All lists the ended IDs kept, each room's oldest first.
func (f *FileEnded) All() ([]EndedID, error) {
	var out []EndedID
	err := f.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(endedBucket).ForEach(func(k, _ []byte) error {
			if f.old(k) {
				return nil
			}
			e := EndedID{Session: string(k[sha256.Size+8:])}
			copy(e.Room[:], k)
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read the ended /mcp sessions: %w", err)
	}
	return out, nil
}

// loadEnded puts the IDs kept of the previous run among their rooms'
// ended ones, before the endpoint serves.
func (h *Handler) loadEnded() {
	if h.o.Ended == nil {
		return
	}
	all, err := h.o.Ended.All()
	if err != nil {
		// The sessions ended before the restart may be served again.
		h.log.Error("read the /mcp sessions ended before the restart", "err", err)
	}
	for _, e := range all {
		rm := h.rooms[e.Room]
		if rm == nil {
			// Its token is learnt when a request of the room comes (enter).
			rm = &room{key: e.Room, bridges: make(map[string]*bridge)}
			h.rooms[e.Room] = rm
		}
		h.endedLocked(rm, e.Session)
	}
}

// keepEnded keeps the ID of s, whose client is ending it, for the next
// run, before the DELETE is answered. A session the disk does not take
// still ends, until the process stops.
func (h *Handler) keepEnded(s *session) {
	if h.o.Ended == nil || h.key == nil {
		return
	}
	if err := h.o.Ended.Keep(s.b.room.key, s.id); err != nil {
		h.log.Error("keep an ended /mcp session for after a restart; it is served again after one", "err", err)
	}
}
