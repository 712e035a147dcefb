package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
)

// ProbeName is the file Probe writes in the data directory and removes.
const ProbeName = "agentassistant.probe"

// probeBytes is how much Probe writes: a record of some size.
const probeBytes = 64 << 10

// Probe tries whether the data directory takes writes again: it writes
// probeBytes into a file of its own at the offset the database or the
// journal ends at, whichever is larger (a sparse file: it takes the
// disk's blocks of what it writes alone), and removes it. Past a full
// disk or a limit of the files' size (RLIMIT_FSIZE), it fails as the
// database's growth would.
func (s *Store) Probe(context.Context) error {
	var at int64
	for _, name := range []string{FileName, JournalName} {
		if fi, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
			at = max(at, fi.Size())
		}
	}
	path := filepath.Join(s.dir, ProbeName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- the operator's data directory
	if err != nil {
		return err
	}
	_, err = f.WriteAt(make([]byte, probeBytes), at)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close(), os.Remove(path))
}
