// Package datadir says which format the server's data directory is in
// (the request store, the token, the study logs), so a newer binary can
// bring an older directory up to date and an older binary refuses a
// directory it would misread, before either touches anything else.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentassistant/agentassistant/internal/opt"
)

// FileName is the file, in the data directory, that holds its format:
// the number on its first line, then which build wrote it.
const FileName = "FORMAT"

// Current is the format this build writes.
//
//	1: no FORMAT file (every release before it was written).
//	2: FORMAT, written on first start; files as in 1.
const Current = 2

// known are the entries format 1 wrote, by which a directory without
// FORMAT is told from a new one.
var known = []string{"agentassistant.db", "agentassistant.journal", "token", "logs", "upstream-cards.json"}

// migrations[v] brings a directory from format v to v+1. Each step must
// leave the directory readable by the next one even when it stops half
// way (FORMAT is written last, so a step that did not finish runs again).
var migrations = map[int]func(dir string) error{
	1: func(string) error { return nil }, // 2 adds FORMAT only
}

// NewerError: the directory is in a format this build does not know.
type NewerError struct {
	Dir     string
	Format  int
	Writer  string // which build wrote it, "" when FORMAT does not say
	Running string // this build
}

func (e *NewerError) Error() string {
	need := "a newer agentassistant-srv"
	if e.Writer != "" {
		need = e.Writer + " or newer"
	}
	return fmt.Sprintf("the data directory %s is in format %d, newer than this agentassistant-srv (%s) knows (%d and older): it needs %s; nothing was changed",
		e.Dir, e.Format, e.Running, Current, need)
}

// Prepare checks the format of dir before anything else touches it, and
// brings an older one up to Current; a new directory is created with
// FORMAT. version is this build's, recorded in FORMAT as its writer. A
// directory in a newer format is refused with a *NewerError and left as
// it was. It returns the format found: 0 for a new directory.
func Prepare(dir, version string, log *slog.Logger) (int, error) {
	opt.Logger(&log)
	found, writer, err := read(dir)
	if err != nil {
		return 0, err
	}
	switch {
	case found > Current:
		return found, &NewerError{Dir: dir, Format: found, Writer: writer, Running: version}
	case found == Current:
		return found, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return found, fmt.Errorf("create data directory: %w", err)
	}
	if found > 0 {
		for v := found; v < Current; v++ {
			if err := migrations[v](dir); err != nil {
				return found, fmt.Errorf("upgrade data directory %s from format %d to %d: %w", dir, v, v+1, err)
			}
		}
	}
	if err := write(dir, version); err != nil {
		return found, err
	}
	if found > 0 {
		log.Info("data directory upgraded", "dir", dir, "from_format", found, "to_format", Current)
	}
	return found, nil
}

// read returns dir's format and its writer: 0 when dir is new (missing,
// or holding nothing the server wrote), 1 when it has the server's files
// and no FORMAT.
func read(dir string) (int, string, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName)) // #nosec G304 -- the operator's data directory
	if errors.Is(err, fs.ErrNotExist) {
		for _, name := range known {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return 1, "", nil
			}
		}
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read data directory format: %w", err)
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	v, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || v < 1 {
		return 0, "", fmt.Errorf("the data directory's %s does not start with its format number (%q): it was not written by agentassistant-srv; nothing was changed",
			filepath.Join(dir, FileName), first)
	}
	writer, _ := strings.CutPrefix(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), "written by ")
	return v, writer, nil
}

// write puts FORMAT in place whole.
func write(dir, version string) error {
	b := fmt.Appendf(nil, "%d\nwritten by agentassistant-srv %s\n", Current, version)
	if err := WriteFile(filepath.Join(dir, FileName), b); err != nil {
		return fmt.Errorf("write data directory format: %w", err)
	}
	return nil
}

// WriteFile replaces path, a file of the data directory, with b,
// readable by its owner only: a new file, synced, renamed over, and the
// directory synced, so that a crash leaves the old file or the new one,
// never a part of one, and the new one is on disk when it returns.
func WriteFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // 0600
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
