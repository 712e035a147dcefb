package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
)

// laterNotes keep here what could not be written to the notes just now
// (a cluster's NATS out of reach, or without a quorum) and write it once
// the store answers: the note of a question sent to Telegram or Slack
// just then must reach whichever instance takes the person's reply,
// however long after, or that reply would answer nothing. Until it is
// written, this instance reads its own note from here.
//
// Each key has at most one write to the store in flight, and a write
// made while one is (or waits) replaces it: a later note of a message
// (its question settled) is never overtaken by an earlier one written
// late. A note kept goes once it is written, replaced by a write that
// is, or past its time; the notes kept are bounded (maxLaterNotes,
// maxLaterBytes): past them a write that fails is told to its caller,
// as before. What is kept is lost with the process.
type laterNotes struct {
	notes Notes
	now   func() time.Time
	log   *slog.Logger
	// shared: the notes are a cluster's, written by other instances too
	// (mayCome).
	shared bool
	// lost: a note could be neither written nor kept (a disk full for
	// long), so a message sent may be one whose question is not known
	// here (notesLost).
	lost atomic.Bool
	// wake tells run that a note is kept.
	wake owned.Wake

	mu    sync.Mutex // held alone, never across a write to notes
	keys  map[string]*laterNote
	bytes int // of the values in keys
	// keptSince counts the notes kept since all were last written, for
	// the log.
	keptSince int
}

// Now is the time the notes judge their ends by (clockOf).
func (l *laterNotes) Now() time.Time { return l.now() }

// laterNote is the newest write of a key that is in flight or waits.
type laterNote struct {
	value []byte
	until time.Time
	del   bool
	// seq tells a write from the one that replaced it.
	seq uint64
	// busy: a write of the key is in flight; kept: its newest value
	// waits for run to write it.
	busy, kept bool
}

const (
	// maxLaterNotes and maxLaterBytes bound the notes kept: those of a
	// few hundred questions asked during an outage.
	maxLaterNotes = 1024
	maxLaterBytes = 8 << 20
	// laterRetry and laterMaxRetry space the tries to write the notes
	// kept: a reply read just as the store is back finds its question's
	// note once it is written, so the wait is kept short.
	laterRetry    = 100 * time.Millisecond
	laterMaxRetry = 2 * time.Second
)

// errNoteBusy: a note to be written now whose key has a write in flight.
var errNoteBusy = errors.New("an earlier note of the same key is still being written")

func newLaterNotes(notes Notes, now func() time.Time, log *slog.Logger) *laterNotes {
	opt.Clock(&now)
	return &laterNotes{notes: notes, now: now, log: logOf(log), wake: owned.NewWake(), keys: map[string]*laterNote{}}
}

// Put writes value under key, or keeps it here to be written once the
// store answers; an error only when it can do neither.
func (l *laterNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	err := l.write(ctx, key, laterNote{value: value, until: until}, true)
	if err != nil {
		l.lost.Store(true)
	}
	return err
}

// Delete forgets key, now or once the store answers.
func (l *laterNotes) Delete(ctx context.Context, key string) error {
	return l.write(ctx, key, laterNote{del: true}, true)
}

// Create creates key in the store now, or fails: what it tells (that
// this instance is the one) cannot wait.
func (l *laterNotes) Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	return l.notes.Create(ctx, key, value, until)
}

// Get is the note kept here under key, else the store's.
func (l *laterNotes) Get(ctx context.Context, key string) ([]byte, bool, error) {
	l.mu.Lock()
	if p, ok := l.keys[key]; ok {
		defer l.mu.Unlock()
		if p.del || !l.now().Before(p.until) {
			return nil, false, nil
		}
		return append([]byte(nil), p.value...), true, nil
	}
	l.mu.Unlock()
	return l.notes.Get(ctx, key)
}

// write writes n under key, in order with the key's other writes; keep:
// a write that fails is kept, to be written later.
func (l *laterNotes) write(ctx context.Context, key string, n laterNote, keep bool) error {
	if len(n.value) > MaxNote {
		return ErrNoteTooLarge
	}
	n.value = bytes.Clone(n.value)
	l.mu.Lock()
	if p, ok := l.keys[key]; ok {
		// A write of it is in flight or waits: this one is written after.
		if !keep {
			l.mu.Unlock()
			return fmt.Errorf("keep a note: %w", errNoteBusy)
		}
		if l.bytes-len(p.value)+len(n.value) > maxLaterBytes {
			l.mu.Unlock()
			return errors.New("keep a note: too many notes wait to be written")
		}
		l.replace(p, n)
		if !p.kept {
			p.kept = true
			l.keptSince++
		}
		l.mu.Unlock()
		l.wake.Tell()
		return nil
	}
	if len(l.keys) >= maxLaterNotes || l.bytes+len(n.value) > maxLaterBytes {
		// Too many kept to keep another: written now, or not at all.
		l.mu.Unlock()
		return l.store(ctx, key, n)
	}
	p := &laterNote{}
	l.replace(p, n)
	p.busy = true
	l.keys[key] = p
	seq := p.seq
	l.mu.Unlock()

	err := l.store(ctx, key, n)

	l.mu.Lock()
	defer l.mu.Unlock()
	p.busy = false
	switch {
	case p.seq != seq: // replaced meanwhile: run writes the newer
		if p.kept {
			l.wake.Tell()
		}
		return nil
	case err == nil:
		l.drop(key, p)
		return nil
	case !keep:
		l.drop(key, p)
		return err
	}
	if l.keptSince == 0 && !l.anyKept() {
		l.log.Warn("channel notes cannot be written just now; kept here, and written once the store answers", "err", err)
	}
	p.kept = true
	l.keptSince++
	l.wake.Tell()
	return nil
}

// replace makes n the newest write of p. l.mu is held.
func (l *laterNotes) replace(p *laterNote, n laterNote) {
	l.bytes += len(n.value) - len(p.value)
	p.value, p.until, p.del = n.value, n.until, n.del
	p.seq++
}

// drop forgets the key's note, written. l.mu is held.
func (l *laterNotes) drop(key string, p *laterNote) {
	if l.keys[key] == p {
		delete(l.keys, key)
		l.bytes -= len(p.value)
	}
}

// anyKept: a note waits for run. l.mu is held.
func (l *laterNotes) anyKept() bool {
	for _, p := range l.keys {
		if p.kept {
			return true
		}
	}
	return false
}

// store makes the write n of key in the store, within noteTimeout.
func (l *laterNotes) store(ctx context.Context, key string, n laterNote) error {
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	if n.del {
		return l.notes.Delete(ctx, key)
	}
	return l.notes.Put(ctx, key, n.value, n.until)
}

// run writes the notes kept, trying again with backoff while the store
// does not answer, until ctx ends. Its owner is the Manager.
func (l *laterNotes) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		for wait := laterRetry; ; wait = min(2*wait, laterMaxRetry) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			if l.writeKept(ctx) {
				break
			}
		}
	}
}

// writeKept writes the notes kept, one at a time, until one fails; it
// reports whether none is kept any more.
func (l *laterNotes) writeKept(ctx context.Context) bool {
	l.mu.Lock()
	var keys []string
	now := l.now()
	for k, p := range l.keys {
		switch {
		case !p.kept || p.busy:
		case !p.del && !now.Before(p.until):
			l.drop(k, p) // its question expired meanwhile: nothing to write
		default:
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	for _, k := range keys {
		l.mu.Lock()
		p, ok := l.keys[k]
		if !ok || !p.kept || p.busy {
			l.mu.Unlock()
			continue
		}
		p.busy, p.kept = true, false
		n, seq := *p, p.seq
		l.mu.Unlock()

		err := l.store(ctx, k, n)

		l.mu.Lock()
		p.busy = false
		switch {
		case p.seq != seq: // replaced meanwhile: written at the next round
			p.kept = true
		case err == nil:
			l.drop(k, p)
		default:
			p.kept = true
		}
		l.mu.Unlock()
		if err != nil {
			l.log.Debug("channel notes still cannot be written", "err", err)
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.anyKept() {
		return false
	}
	if l.keptSince > 0 {
		l.log.Info("channel notes kept meanwhile are written", "notes", l.keptSince)
		l.keptSince = 0
	}
	return true
}

// putNow writes v under key in notes now, or fails (not kept for
// later).
func putNow(ctx context.Context, notes Notes, key string, v any, until time.Time) error {
	l, ok := notes.(*laterNotes)
	if !ok {
		return putJSON(ctx, notes, key, v, until)
	}
	return putJSON(ctx, nowNotes{l}, key, v, until)
}

// nowNotes are laterNotes whose Put does not keep: for a note that
// must be in the store before what it names goes out.
type nowNotes struct{ *laterNotes }

func (n nowNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	return n.write(ctx, key, laterNote{value: value, until: until}, false)
}
