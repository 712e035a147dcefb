// Package studylog writes the research logs of relay sessions: one JSONL
// file per study session, logs/study/<sessionId>.jsonl, one event a line.
//
// What one owner (a token) may write is bounded, in files and in bytes,
// counted from the process's start: past either, a new log is refused and
// an event that would pass the bytes is not written (no partial line);
// nothing already written is ever truncated or deleted to make room.
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
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
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
	root string // the data directory
	o    Options
	mu   lockorder.Mutex[lockorder.StudyLogs] // serialises id allocation within this process
	// use is what each owner has written; guarded by mu (the map; a
	// usage's bytes are an atomic, counted under a relay session's lock).
	use map[string]*usage
}

// Defaults of the per-owner bounds (Options).
const (
	DefaultMaxFilesPerOwner = 10000
	DefaultMaxBytesPerOwner = 1 << 30
)

// FinalReserve is the room each open log keeps of its owner's bytes for
// its last line (Log.AppendLast): a log stopped at the bound can still
// say why it ends.
const FinalReserve = 1024

// Errors of the bounds: the relay names the setting to its peers.
var (
	// ErrTooManyFiles: the owner has created MaxFilesPerOwner logs.
	ErrTooManyFiles = errors.New("too many study logs")
	// ErrFull: the event would take the owner past MaxBytesPerOwner;
	// nothing of it was written, and the log takes nothing more but its
	// last line.
	ErrFull = errors.New("study log bytes exhausted")
)

// Options for Open.
type Options struct {
	// Sync makes every event fsync'd before it is forwarded. Without it an
	// event is written (so it survives a crash of the server) but not
	// forced to the disk (so it may not survive one of the machine).
	Sync bool
	// MaxFilesPerOwner bounds the logs one owner creates (default
	// DefaultMaxFilesPerOwner); past it Create fails with ErrTooManyFiles.
	MaxFilesPerOwner int
	// MaxBytesPerOwner bounds the bytes one owner's logs hold, all
	// together (default DefaultMaxBytesPerOwner), each open log's
	// FinalReserve included; past it Append fails with ErrFull.
	MaxBytesPerOwner int64
}

// Open returns the log directory under dataDir, creating it if needed.
func Open(dataDir string, o Options) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(dataDir, RelDir), 0o700); err != nil {
		return nil, fmt.Errorf("create study log directory: %w", err)
	}
	opt.Default(&o.MaxFilesPerOwner, DefaultMaxFilesPerOwner)
	opt.Default(&o.MaxBytesPerOwner, DefaultMaxBytesPerOwner)
	return &Dir{root: dataDir, o: o, use: make(map[string]*usage)}, nil
}

// Limits returns the bounds in force (the defaults filled in).
func (d *Dir) Limits() (files int, bytes int64) { return d.o.MaxFilesPerOwner, d.o.MaxBytesPerOwner }

// usage is what one owner has written since the process started.
type usage struct {
	files int // guarded by Dir.mu
	bytes atomic.Int64
}

// take counts n more bytes unless that passes max.
func (u *usage) take(n, max int64) bool {
	for {
		cur := u.bytes.Load()
		if cur+n > max {
			return false
		}
		if u.bytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// usageLocked returns owner's usage, made if need be. Called with mu held.
func (d *Dir) usageLocked(owner string) *usage {
	u := d.use[owner]
	if u == nil {
		u = &usage{}
		d.use[owner] = u
	}
	return u
}

// idPattern is a session id's form, s-YYYYMMDD-NNN.
var idPattern = regexp.MustCompile(`^s-(\d{8})-(\d{3,})$`)

// Create allocates the next session id for the day of now,
// s-YYYYMMDD-NNN, unique across restarts because the file is created
// exclusively, and opens its log, counted as owner's. It fails with
// ErrTooManyFiles or ErrFull when owner has no room for one more. Ids
// are unique beyond this directory with reserve: unless nil, it is asked
// for each id before it is taken, and false passes it over (in a
// cluster, another instance has it).
func (d *Dir) Create(owner string, now time.Time, reserve func(id string) (bool, error)) (*Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.usageLocked(owner)
	if u.files >= d.o.MaxFilesPerOwner {
		return nil, fmt.Errorf("create study log: %w: %d of %d", ErrTooManyFiles, u.files, d.o.MaxFilesPerOwner)
	}
	if !u.take(FinalReserve, d.o.MaxBytesPerOwner) {
		return nil, fmt.Errorf("create study log: %w: %d bytes of %d", ErrFull, u.bytes.Load(), d.o.MaxBytesPerOwner)
	}
	l, err := d.createLocked(now, reserve)
	if err != nil {
		u.bytes.Add(-FinalReserve)
		return nil, err
	}
	u.files++
	l.own, l.max, l.reserved = u, d.o.MaxBytesPerOwner, FinalReserve
	return l, nil
}

func (d *Dir) createLocked(now time.Time, reserve func(id string) (bool, error)) (*Log, error) {
	day := now.UTC().Format("20060102")
	dir := filepath.Join(d.root, RelDir)
	next := 1
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list study logs: %w", err)
	}
	for _, e := range entries {
		id, isLog := strings.CutSuffix(e.Name(), ".jsonl")
		if m := idPattern.FindStringSubmatch(id); isLog && m != nil && m[1] == day {
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
		return &Log{f: f, id: id, rel: rel, sync: d.o.Sync}, nil
	}
	return nil, errors.New("create study log: no free session id")
}

// Resume opens the log of session id to go on with it: a study session
// whose host moved here from another instance of a cluster. Its events
// are appended to the file of that name here, made if need be; the
// event index goes on from the events already in it.
//
// The session was let in where it started, so Resume is not refused for
// owner's files (a file it makes here counts as one); what it writes
// counts against owner's bytes, and a log resumed without room for its
// last line takes nothing but that line.
func (d *Dir) Resume(owner, id string) (*Log, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("resume study log: %q is not a session id", id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rel := RelDir + "/" + id + ".jsonl"
	path := filepath.Join(d.root, filepath.FromSlash(rel))
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600) // #nosec G304 -- id matched idPattern above
	if err != nil {
		return nil, fmt.Errorf("resume study log: %w", err)
	}
	n, err := countLines(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("resume study log: %w", err)
	}
	u := d.usageLocked(owner)
	if errors.Is(statErr, fs.ErrNotExist) {
		u.files++
	}
	l := &Log{f: f, id: id, rel: rel, sync: d.o.Sync, next: n, own: u, max: d.o.MaxBytesPerOwner}
	if u.take(FinalReserve, d.o.MaxBytesPerOwner) {
		l.reserved = FinalReserve
	} else {
		l.full = true
	}
	return l, nil
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
	// own is its owner's usage, max the owner's bound; reserved is what
	// it holds of own for its last line; full: an event did not fit, and
	// only the last line may follow.
	own      *usage
	max      int64
	reserved int64
	full     bool
	last     bool // AppendLast was called
	closed   bool
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
// been synced when Options.Sync is set). payload must be valid JSON. An
// event that would take the owner past its bytes is not written: ErrFull,
// now and for every Append after (the log is to end, see AppendLast).
func (l *Log) Append(now time.Time, direction, typ, id, replyTo string, payload json.RawMessage) error {
	if l.full {
		return fmt.Errorf("append to study log %s: %w", l.id, ErrFull)
	}
	if err := l.encode(now, direction, typ, id, replyTo, payload); err != nil {
		return err
	}
	if !l.own.take(int64(len(l.buf)), l.max) {
		l.full = true
		return fmt.Errorf("append to study log %s: %w: %d bytes of %d", l.id, ErrFull, l.own.bytes.Load(), l.max)
	}
	return l.write()
}

// AppendLast writes the log's last event, in the room kept for it
// (FinalReserve) or, past that, in what is left of the owner's bytes; it
// fails with ErrFull, writing nothing, if the event fits in neither.
// Nothing is written after it.
func (l *Log) AppendLast(now time.Time, direction, typ, id, replyTo string, payload json.RawMessage) error {
	if l.last {
		return fmt.Errorf("append last event to study log %s: %w", l.id, ErrFull)
	}
	if err := l.encode(now, direction, typ, id, replyTo, payload); err != nil {
		return err
	}
	n := int64(len(l.buf))
	fits := n <= l.reserved || l.own.take(n-l.reserved, l.max)
	if fits && n < l.reserved {
		l.own.bytes.Add(n - l.reserved) // the rest of the room goes back
	}
	if !fits {
		l.own.bytes.Add(-l.reserved)
	}
	l.reserved, l.full, l.last = 0, true, true
	if !fits {
		return fmt.Errorf("append last event to study log %s: %w", l.id, ErrFull)
	}
	return l.write()
}

// encode puts the event's line in l.buf.
func (l *Log) encode(now time.Time, direction, typ, id, replyTo string, payload json.RawMessage) error {
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
	return nil
}

// write writes l.buf, whose bytes are counted already.
func (l *Log) write() error {
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

// Close closes the file and gives back the room kept for its last line.
// Idempotent.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.own != nil {
		l.own.bytes.Add(-l.reserved)
		l.reserved = 0
	}
	return l.f.Close()
}
