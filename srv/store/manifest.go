package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ManifestName is the file, beside the database, that says what the
// database holds: how many records, and the key, project and kind of each
// pending request. It is written after every commit that changes either,
// so that when the database is found damaged (cut short, say), the
// requests it can no longer give back are named rather than silently
// gone: a cut file keeps neither its records nor their keys. It holds no
// question's text.
//
// It also keeps the lost requests no device has dismissed yet (Lost,
// Dismiss), so that they survive a restart and a damage of the database.
const ManifestName = "agentassistant.pending"

// Lost is a request that was pending and could not be restored: the
// database that held it was damaged, or lost records.
type Lost struct {
	Room             string    `json:"room"`
	ID               string    `json:"id"`
	Kind             int       `json:"kind"`
	ProjectDirectory string    `json:"projectDirectory,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	// Found is when Open found it lost.
	Found time.Time `json:"found"`
}

func (l *Lost) key() string {
	r := Record{Room: l.Room, ID: l.ID, CreatedAt: l.CreatedAt}
	return string(r.Key())
}

// pendingRef is what the manifest keeps of a pending record.
func pendingRef(r *Record) *Lost {
	return &Lost{Room: r.Room, ID: r.ID, Kind: r.Kind, ProjectDirectory: r.ProjectDirectory, CreatedAt: r.CreatedAt}
}

type manifest struct {
	Records uint64 `json:"records"`
	// Deleted is the database's count of records deleted on purpose
	// (deletedKey) when Records was.
	Deleted uint64 `json:"deleted,omitempty"`
	Pending []Lost `json:"pending"`
	Lost    []Lost `json:"lost,omitempty"`
}

// readManifest reads the manifest in dir: nil, nil when there is none (a
// store made before manifests, or a new one).
func readManifest(dir string) (*manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName)) // #nosec G304 G703 -- our own file in the data directory
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.LittleEndian.Uint32(b) {
		return nil, errDamaged
	}
	var m manifest
	if err := json.Unmarshal(b[4:], &m); err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return &m, nil
}

// saveManifestLocked writes the manifest: a new file renamed over the
// old, so that a crash leaves one or the other whole. Called with s.manMu
// held.
func (s *Store) saveManifestLocked() error {
	m := manifest{Records: s.records, Deleted: s.deleted, Pending: make([]Lost, 0, len(s.pendingRefs)), Lost: s.lost}
	for _, k := range slices.Sorted(maps.Keys(s.pendingRefs)) {
		m.Pending = append(m.Pending, *s.pendingRefs[k])
	}
	js, err := json.Marshal(&m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(js)), crc32.Checksum(js, castagnoli))
	b = append(b, js...)
	path := filepath.Join(s.dir, ManifestName)
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) // #nosec G304 G703 -- beside the database
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path) // #nosec G703 -- as above
	}
	if err != nil {
		_ = os.Remove(tmp) // #nosec G703 -- as above
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// noteLocked brings the manifest up to date after a commit that put es,
// deleted the keys gone and left c in the database. A manifest that
// cannot be written is logged, not returned: the records are saved.
// Called with s.manMu held.
func (s *Store) noteLocked(es []entry, gone []string, c counts) {
	changed := c != counts{s.records, s.deleted}
	s.records, s.deleted = c.records, c.deleted
	for _, e := range es {
		k := string(e.key)
		_, had := s.pendingRefs[k]
		switch {
		case e.ref != nil:
			s.pendingRefs[k] = e.ref
			changed = changed || !had
		case had:
			delete(s.pendingRefs, k)
			changed = true
		}
	}
	for _, k := range gone {
		if _, had := s.pendingRefs[k]; had {
			delete(s.pendingRefs, k)
			changed = true
		}
	}
	if !changed {
		return
	}
	if err := s.saveManifestLocked(); err != nil {
		if s.manWrites.Fail() { // told once while it fails (a full disk), not at every commit
			s.log.Warn("the list of pending requests beside the database was not written: were the database damaged now, what it lost could not be named; told once more when it is", "err", err)
		} else {
			s.log.Debug("the list of pending requests beside the database was not written", "err", err)
		}
	} else if ok, _, _ := s.manWrites.End(); ok {
		s.log.Info("the list of pending requests beside the database is written again")
	}
}

// Lost returns the requests found lost that no device has dismissed yet.
func (s *Store) Lost() []Lost {
	s.manMu.Lock()
	defer s.manMu.Unlock()
	return slices.Clone(s.lost)
}

// Dismiss forgets the lost requests of room with the given IDs: a device
// showed them to the person, who dismissed the notice.
func (s *Store) Dismiss(room string, ids []string) error {
	s.manMu.Lock()
	defer s.manMu.Unlock()
	n := len(s.lost)
	s.lost = slices.DeleteFunc(s.lost, func(l Lost) bool { return l.Room == room && slices.Contains(ids, l.ID) })
	if len(s.lost) == n {
		return nil
	}
	if err := s.saveManifestLocked(); err != nil {
		return fmt.Errorf("dismiss lost requests: %w", err)
	}
	return nil
}

// maxLost bounds the lost requests kept for the devices to be told of:
// the newest ones stay.
const maxLost = 1000

// tally of what Open found missing, for its log.
type missing struct {
	named   []string // keys of the records lost, as far as they are known
	pending []Lost   // the pending ones among them
	unnamed int      // records lost whose keys were not kept (settled ones)
	unknown bool     // there was no manifest to tell
}

func (m *missing) total() int { return len(m.named) + m.unnamed }

// findMissing compares what the manifest said the database held with what
// it holds now (inDB: its keys, c: their count, before the journal is
// replayed, and how many it deleted on purpose) and what the journal gave
// back (journal). damaged are the keys of records the damaged database
// still showed but could not be read.
func findMissing(prior *manifest, inDB func(string) bool, c counts, journal []Record, damaged []string) missing {
	var out missing
	replayed := make(map[string]bool, len(journal))
	for i := range journal {
		replayed[string(journal[i].Key())] = true
	}
	there := func(k string) bool { return inDB(k) || replayed[k] }
	seen := make(map[string]bool)
	if prior == nil {
		out.unknown = true
	} else {
		for _, p := range prior.Pending {
			if k := p.key(); !there(k) && !seen[k] {
				seen[k] = true
				out.named = append(out.named, k)
				out.pending = append(out.pending, p)
			}
		}
	}
	for _, k := range damaged {
		if !there(k) && !seen[k] {
			seen[k] = true
			out.named = append(out.named, k)
		}
	}
	if prior != nil {
		// The records that were there and are not; the named ones among
		// them. A damaged file's leftover pages may have given back
		// records cleared before, so this is at least how many.
		// Those deleted on purpose since the manifest was written (a
		// crash came between the commit and the manifest's write) are
		// not lost; a database made afresh counts from zero.
		n := int64(prior.Records) - int64(c.records) - int64(len(out.named)) // #nosec G115 -- counts of records
		if c.deleted > prior.Deleted {
			n -= int64(c.deleted - prior.Deleted) // #nosec G115 -- as above
		}
		if n > 0 {
			out.unnamed = int(n)
		}
	}
	slices.Sort(out.named)
	return out
}
