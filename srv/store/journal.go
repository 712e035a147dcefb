package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// JournalName is the journal file inside the data directory.
//
// The writer appends each gathered batch of records to the journal, in
// one write, and puts them into the database only now and then (a fold:
// every second, or sooner when many have gathered or someone reads). A
// commit to the database rewrites pages; an append does not, so the
// records of a busy second cost one commit instead of hundreds. The
// journal is emptied after each fold; on Open, whatever it still holds
// (the server stopped between a batch and its fold) goes into the database
// first. The crash window stays the gather (GroupDelay).
const JournalName = "agentassistant.journal"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a record ready for the database: its key and its encoding.
type entry struct{ key, val []byte }

// journalEntry frames an encoded record: its length and CRC-32C (both
// little-endian uint32), then the bytes.
func journalEntry(b, val []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(val))) // #nosec G115 -- a record is far below 4 GiB (frames are capped at 16 MiB)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(val, castagnoli))
	return append(b, val...)
}

// readJournal returns the records in b, up to the first entry that is torn
// (the server stopped mid-write) or damaged; what follows is not trusted.
func readJournal(b []byte) []Record {
	var out []Record
	for len(b) >= 8 {
		n := int(binary.LittleEndian.Uint32(b))
		sum := binary.LittleEndian.Uint32(b[4:])
		if n > len(b)-8 {
			break
		}
		val := b[8 : 8+n]
		if crc32.Checksum(val, castagnoli) != sum {
			break
		}
		var r Record
		if decode(val, &r) != nil {
			break
		}
		out = append(out, r)
		b = b[8+n:]
	}
	return out
}

// openJournal puts what the journal in dir holds into the database,
// empties it and returns it open for appending.
func (s *Store) openJournal(dir string) error {
	path := filepath.Join(dir, JournalName)
	b, err := os.ReadFile(path) // #nosec G304 -- our own file in the data directory
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read journal: %w", err)
	}
	if rs := readJournal(b); len(rs) > 0 {
		if err := s.putAll(rs); err != nil {
			return fmt.Errorf("replay journal: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // #nosec G304 -- as above
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return fmt.Errorf("empty journal: %w", err)
	}
	s.journal = f
	return nil
}
