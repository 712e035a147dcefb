package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentassistant/agentassistant/internal/boltfile"
)

// JournalName is the journal file inside the data directory.
//
// Each batch of records (what was queued while the last one was
// written) is appended to the journal in one write, by the caller that
// waits for it or by the writer goroutine; the writer puts them into the
// database only now and then (a fold: every second, or sooner when many
// have gathered or someone reads). A
// commit to the database rewrites pages; an append does not, so the
// records of a busy second cost one commit instead of hundreds. The
// journal is emptied after each fold; on Open, whatever it still holds
// (the server stopped between a batch and its fold) goes into the database
// first. A record is announced as safe only once its batch is in the
// journal (Ack).
const JournalName = "agentassistant.journal"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a record ready for the database: its key and its encoding,
// and what the manifest keeps of it when it is pending.
type entry struct {
	key, val []byte
	ref      *Lost
}

func newEntry(r *Record) entry {
	e := entry{key: r.Key(), val: encode(r)}
	if r.Status == Pending {
		e.ref = pendingRef(r)
	}
	return e
}

// journalEntry frames an encoded record: its length and CRC-32C (both
// little-endian uint32), then the bytes.
func journalEntry(b, val []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(val))) // #nosec G115 -- a record is far below 4 GiB (frames are capped at 16 MiB)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(val, castagnoli))
	return append(b, val...)
}

// entryAt reads the journal entry at off of b: sound if its length fits,
// its checksum matches and its record decodes. It returns the record and
// the entry's length.
func entryAt(b []byte, off int) (Record, int, bool) {
	val, ok := framedAt(b, off)
	if !ok {
		return Record{}, 0, false
	}
	n := len(val)
	if testHookChecksum != nil {
		testHookChecksum(n)
	}
	var r Record
	if crc32.Checksum(val, castagnoli) != binary.LittleEndian.Uint32(b[off+4:]) || decode(val, &r) != nil || r.Room == "" || r.ID == "" {
		return Record{}, 0, false
	}
	return r, 8 + n, true
}

// framedAt returns the bytes the entry at off of b says it holds, if they
// fit in b and start like a record: what entryAt checksums.
func framedAt(b []byte, off int) ([]byte, bool) {
	if len(b)-off < 9 {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b[off:]))
	val := b[off+8:]
	if n > len(val) || val[0] != formatWire {
		return nil, false
	}
	return val[:n], true
}

// testHookChecksum, when set by a test, is told the length of each
// entry entryAt checksums.
var testHookChecksum func(n int)

// readJournal returns the sound records in b and the byte ranges it could
// not read. Past a torn (the writer stopped mid-write) or damaged entry it
// looks byte by byte for the next sound one, from the damaged entry's
// second byte (its length may be what was damaged): a false start would
// have to pass a CRC-32C and decode as a record.
//
// Each false start costs a checksum over the length it claims; a journal
// crafted to be all false starts would cost its size squared. The search
// checksums at most a few times the journal's size, then gives up: the rest
// is reported unreadable (and the journal is kept aside).
func readJournal(b []byte) (out []Record, bad [][2]int) {
	spare := 4 * len(b)
	// afford reports whether the entry at off may be checked, and pays for it.
	afford := func(off int) bool {
		val, ok := framedAt(b, off)
		if ok {
			spare -= len(val)
		}
		return spare >= 0
	}
	for off := 0; off < len(b); {
		if !afford(off) {
			bad = append(bad, [2]int{off, len(b)})
			break
		}
		if r, n, ok := entryAt(b, off); ok {
			out = append(out, r)
			off += n
			continue
		}
		next := off + 1
		for ; next < len(b); next++ {
			if !afford(next) {
				next = len(b)
				break
			}
			if _, _, ok := entryAt(b, next); ok {
				break
			}
		}
		bad = append(bad, [2]int{off, next})
		off = next
	}
	return out, bad
}

// describe says which bytes of a journal of size bytes could not be read.
func describe(bad [][2]int, size int) string {
	var parts []string
	n := 0
	for i, r := range bad {
		n += r[1] - r[0]
		if i < 5 {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	if len(bad) > 5 {
		parts = append(parts, "…")
	}
	what := fmt.Sprintf("%d of %d bytes (at %s)", n, size, strings.Join(parts, ", "))
	if len(bad) == 1 && bad[0][1] == size {
		what += ", at the end: the last write was cut short"
	}
	return what
}

// openJournal puts what the journal in dir holds into the database,
// empties it and keeps it open for appending. A journal with bytes it
// cannot read is set aside first, once what it could read is in the
// database. It returns the records it put.
func (s *Store) openJournal(dir string, wrap func(JournalFile) JournalFile) ([]Record, error) {
	path := filepath.Join(dir, JournalName)
	b, err := os.ReadFile(path) // #nosec G304 G703 -- our own file in the data directory
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	rs, bad := readJournal(b)
	if len(rs) > 0 {
		if err := s.putAll(rs); err != nil {
			// A full disk: the journal keeps them, untouched, for the
			// next start.
			return nil, fmt.Errorf("the request journal %s holds %d records the database cannot take now (%w): they stay in the journal; free space in %s (is its disk full?) and start again",
				path, len(rs), err, dir)
		}
	}
	if len(bad) > 0 {
		kept, err := boltfile.SetAside(path)
		if err != nil {
			return nil, fmt.Errorf("the request journal %s is damaged and could not be set aside (%w): move it out of the way and start again", path, err)
		}
		s.log.Error("the request journal was damaged: it was set aside and its intact records are restored",
			"file", path, "kept_as", kept, "restored", len(rs), "unreadable", describe(bad, len(b)))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // #nosec G304 G703 -- as above
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("empty journal: %w", err)
	}
	s.journal = f
	if wrap != nil {
		s.journal = wrap(f)
	}
	return rs, nil
}
