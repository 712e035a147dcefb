// Package studylog writes the research logs of relay sessions: one JSONL
// file per study session, logs/study/<sessionId>.jsonl, one event a line.
package studylog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
)

// RelDir is where the logs live, relative to the server's data directory.
const RelDir = "logs/study"

// Directions of an event, seen from the host: "in" to the host (from an
// agent), "out" from the host, "internal" the relay's own.
const (
	In       = "in"
	Out      = "out"
	Internal = "internal"
)

// Dir allocates session ids and creates their log files.
type Dir struct {
	root  string // the data directory
	fsync bool
	mu    lockorder.Mutex[lockorder.StudyLogs] // serialises id allocation within this process
}

// Options for Open.
type Options struct {
	// Sync makes every event fsync'd before it is forwarded. Without it an
	// event is written (so it survives a crash of the server) but not
	// forced to the disk (so it may not survive one of the machine).
	Sync bool
}

// Open returns the log directory under dataDir, creating it if needed.
func Open(dataDir string, o Options) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(dataDir, RelDir), 0o700); err != nil {
		return nil, fmt.Errorf("create study log directory: %w", err)
	}
	return &Dir{root: dataDir, fsync: o.Sync}, nil
}

var idPattern = regexp.MustCompile(`^s-(\d{8})-(\d{3,})\.jsonl$`)

// Create allocates the next session id for the day of now,
// s-YYYYMMDD-NNN, unique across restarts because the file is created
// exclusively, and opens its log.
func (d *Dir) Create(now time.Time) (*Log, error) { return d.CreateReserved(now, nil) }

// CreateReserved is Create with ids unique beyond this directory: reserve,
// unless nil, is asked for each id before it is taken, and false passes it
// over (in a cluster, another instance has it).
func (d *Dir) CreateReserved(now time.Time, reserve func(id string) (bool, error)) (*Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	day := now.UTC().Format("20060102")
	dir := filepath.Join(d.root, RelDir)
	next := 1
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list study logs: %w", err)
	}
	for _, e := range entries {
		if m := idPattern.FindStringSubmatch(e.Name()); m != nil && m[1] == day {
			if n, _ := strconv.Atoi(m[2]); n >= next {
				next = n + 1
			}
		}
	}
	for range 1000 {
		id := fmt.Sprintf("s-%s-%03d", day, next)
		if reserve != nil {
			ok, err := reserve(id)
			if err != nil {
				return nil, fmt.Errorf("reserve study session id: %w", err)
			}
			if !ok {
				next++
				continue
			}
		}
		rel := RelDir + "/" + id + ".jsonl"
		f, err := os.OpenFile(filepath.Join(d.root, filepath.FromSlash(rel)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, fs.ErrExist) {
			next++
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create study log: %w", err)
		}
		return &Log{f: f, id: id, rel: rel, sync: d.fsync}, nil
	}
	return nil, errors.New("create study log: no free session id")
}

var sessionPattern = regexp.MustCompile(`^s-\d{8}-\d{3,}$`)

// Resume opens the log of session id to go on with it: a study session
// whose host moved here from another instance of a cluster. Its events
// are appended to the file of that name here, made if need be; the
// event index goes on from the events already in it.
func (d *Dir) Resume(id string) (*Log, error) {
	if !sessionPattern.MatchString(id) {
		return nil, fmt.Errorf("resume study log: %q is not a session id", id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rel := RelDir + "/" + id + ".jsonl"
	f, err := os.OpenFile(filepath.Join(d.root, filepath.FromSlash(rel)), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("resume study log: %w", err)
	}
	n, err := countLines(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("resume study log: %w", err)
	}
	return &Log{f: f, id: id, rel: rel, sync: d.fsync, next: n}, nil
}

func countLines(f *os.File) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for off := int64(0); ; {
		k, err := f.ReadAt(buf, off)
		n += bytes.Count(buf[:k], []byte{'\n'})
		off += int64(k)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Log is one session's file. It is not safe for concurrent use: the relay
// appends under its channel lock, which also fixes the order.
type Log struct {
	f    *os.File
	id   string
	rel  string
	sync bool
	next int
	buf  []byte
}

// ID is the session id, s-YYYYMMDD-NNN.
func (l *Log) ID() string { return l.id }

// RelPath is the file relative to the data directory, as given to agents
// in session.ended (logs/study/<id>.jsonl).
func (l *Log) RelPath() string { return l.rel }

// Event is one line of the log. Fields past Payload are extras that help
// analysis; the seed's required ones come first.
type Event struct {
	SessionID  string          `json:"sessionId"`
	EventIndex int             `json:"eventIndex"`
	Timestamp  string          `json:"timestamp"`
	Direction  string          `json:"direction"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	ID         string          `json:"id,omitempty"`
	ReplyTo    string          `json:"replyTo,omitempty"`
}

// Append writes one event and returns once the write has completed (and
// been synced when Options.Sync is set). payload must be valid JSON.
func (l *Log) Append(now time.Time, direction, typ, id, replyTo string, payload json.RawMessage) error {
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	b, err := json.Marshal(Event{
		SessionID: l.id, EventIndex: l.next, Timestamp: now.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Direction: direction, Type: typ, Payload: payload, ID: id, ReplyTo: replyTo,
	})
	if err != nil {
		return fmt.Errorf("encode study log event: %w", err)
	}
	l.buf = append(append(l.buf[:0], b...), '\n')
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("write study log: %w", err)
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("sync study log: %w", err)
		}
	}
	l.next++
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
