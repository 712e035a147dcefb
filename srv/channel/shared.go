package channel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// What Telegram, Slack and e-mail keep for an answer to find on any
// instance of a cluster. A question goes out through the instance it
// was asked on; the person's reply or tap reaches whichever instance
// takes the chat's updates, the mailbox's mails or the app's events.
// So which message asks which question is a note every instance reads
// (Notes), and one instance at a time takes a service's inbound side
// (Leader): Telegram hands each update to one poller, Slack spreads
// events over every connection, and a mailbox watched twice is read
// twice. One process keeps its notes in memory and leads alone.

// Notes keep small values by key until a time, where every instance
// reads them. A value holds a room (store.Room), never a token.
type Notes interface {
	// Put keeps value under key until until (at the latest: a store
	// may bound how long it keeps a note); a value over MaxNote is
	// refused.
	Put(ctx context.Context, key string, value []byte, until time.Time) error
	// Get is the value under key; found is false when there is none or
	// it expired.
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Delete forgets key; a key not there is no error.
	Delete(ctx context.Context, key string) error
	// Create keeps value under key until until, unless a note is there
	// (one past its time is not): created is false then. Of the
	// instances that create the same key, one does.
	Create(ctx context.Context, key string, value []byte, until time.Time) (created bool, err error)
}

// MaxNote bounds a note's value: a question's room, ID, capability and
// button labels, or its message's text (cut at a few thousand
// characters), fit.
const MaxNote = 64 << 10

// ErrNoteTooLarge: a value over MaxNote.
var ErrNoteTooLarge = errors.New("a note is larger than 64 KiB")

// A Leader runs a service's inbound side on one instance at a time.
type Leader interface {
	// Lead runs run whenever this instance leads name, until ctx ends:
	// run's context ends when the lead is lost. name is no secret (a
	// hash of one).
	Lead(ctx context.Context, name string, run func(ctx context.Context))
}

// Alone is the Leader of one process: it always leads.
type Alone struct{}

// Lead runs run until ctx ends.
func (Alone) Lead(ctx context.Context, _ string, run func(ctx context.Context)) { run(ctx) }

// leadName names an inbound side by a hash of what identifies it (a
// bot's token, a mailbox): the same on every instance, and no secret.
func leadName(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + "." + hex.EncodeToString(h.Sum(nil)[:16])
}

// A leading channel names the inbound side its Listen runs, so that one
// instance of a cluster runs it at a time.
type leading interface{ lead() string }

// A noting channel keeps what its answers need in the notes it is
// given.
type noting interface{ useNotes(Notes) }

// answering is what a channel that takes answers (Telegram, Slack,
// e-mail) is given to share with its Manager: the notes (noting) those
// answers find their questions by, and the credentials refused now
// (refusing, refused.go), told what its inbound side finds; or, until
// then or without a Manager, its own: notes in memory, and refusals.
type answering struct {
	mu       sync.Mutex // held alone
	notes    Notes
	refusals *refusals
}

func (h *answering) useNotes(n Notes) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = n
}

func (h *answering) notesOf() Notes {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notes == nil {
		h.notes = NewMemoryNotes(nil)
	}
	return h.notes
}

func (h *answering) useRefusals(r *refusals) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusals = r
}

// refused are the refusals, its own made with log when it has none.
func (h *answering) refused(log *slog.Logger) *refusals {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refusals == nil {
		h.refusals = newRefusals(log, time.Now)
	}
	return h.refusals
}

// MemoryNotes are the notes of one process. Safe for concurrent use.
type MemoryNotes struct {
	now func() time.Time
	mu  sync.Mutex // held alone
	m   map[string]memoryNote
}

type memoryNote struct {
	value []byte
	until time.Time
}

// maxMemoryNotes bounds the notes kept in memory: past it the expired
// go, then any one (its reply is then told it answers nothing).
const maxMemoryNotes = 4 * maxTracked

// NewMemoryNotes returns empty notes; now is the clock (nil: time.Now).
func NewMemoryNotes(now func() time.Time) *MemoryNotes {
	opt.Clock(&now)
	return &MemoryNotes{now: now, m: map[string]memoryNote{}}
}

// Now is the time the notes judge their ends by (clockOf).
func (n *MemoryNotes) Now() time.Time { return n.now() }

// clockOf is the clock notes judge a note's end by, which a note's end
// is written on: in a cluster NATS's (the Manager's Options.Now), which
// may differ from this machine's by more than a claim lasts.
func clockOf(n Notes) func() time.Time {
	if c, ok := n.(interface{ Now() time.Time }); ok {
		return c.Now
	}
	return time.Now
}

// Put keeps value under key until until.
func (n *MemoryNotes) Put(_ context.Context, key string, value []byte, until time.Time) error {
	if len(value) > MaxNote {
		return ErrNoteTooLarge
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.putLocked(key, value, until)
	return nil
}

// putLocked keeps value under key until until; n.mu is held.
func (n *MemoryNotes) putLocked(key string, value []byte, until time.Time) {
	if _, ok := n.m[key]; !ok && len(n.m) >= maxMemoryNotes {
		now := n.now()
		for k, v := range n.m {
			if !now.Before(v.until) {
				delete(n.m, k)
			}
		}
		for k := range n.m {
			if len(n.m) < maxMemoryNotes {
				break
			}
			delete(n.m, k)
		}
	}
	n.m[key] = memoryNote{append([]byte(nil), value...), until}
}

// Get is the value under key, unless it expired.
func (n *MemoryNotes) Get(_ context.Context, key string) ([]byte, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[key]
	if !ok || !n.now().Before(v.until) {
		return nil, false, nil
	}
	return append([]byte(nil), v.value...), true, nil
}

// Create keeps value under key until until, unless a note is there.
func (n *MemoryNotes) Create(_ context.Context, key string, value []byte, until time.Time) (bool, error) {
	if len(value) > MaxNote {
		return false, ErrNoteTooLarge
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.m[key]; ok && n.now().Before(v.until) {
		return false, nil
	}
	n.putLocked(key, value, until)
	return true, nil
}

// Delete forgets key.
func (n *MemoryNotes) Delete(_ context.Context, key string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, key)
	return nil
}

// asked is what a message of a channel asks, as a note: the question,
// the capability its buttons answer with (kept here, not in the
// buttons, which anyone in the chat can read), and, once it is
// settled, why a reply is no longer taken.
type asked struct {
	Room   string    `json:"r"`
	Kind   wire.Kind `json:"k"`
	ID     string    `json:"i"`
	Cap    string    `json:"c,omitempty"`
	Labels []string  `json:"l,omitempty"`
	// Multi: several of Labels may be chosen together (multi_select).
	Multi bool `json:"m,omitempty"`
	// Title is an e-mail question's subject.
	Title string `json:"t,omitempty"`
	// Gone is why a reply to a settled question is not taken; "" while
	// it is pending.
	Gone string `json:"g,omitempty"`
}

// noteTimeout bounds one read or write of a note.
const noteTimeout = 5 * time.Second

// goneFor is how long a settled question's note is kept, to tell a late
// reply why it is not taken.
const goneFor = 24 * time.Hour

// putJSON notes v, as JSON, under key until until.
func putJSON(ctx context.Context, notes Notes, key string, v any, until time.Time) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a note: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	if err := notes.Put(ctx, key, b, until); err != nil {
		return fmt.Errorf("keep a note: %w", err)
	}
	return nil
}

// getAsked is the question noted under key.
func getAsked(ctx context.Context, notes Notes, key string) (asked, bool, error) {
	var q asked
	ok, err := getJSON(ctx, notes, key, &q)
	return q, ok, err
}

// getJSON reads the note under key, JSON, into v.
func getJSON(ctx context.Context, notes Notes, key string, v any) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	b, ok, err := notes.Get(ctx, key)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("read a note: %w", err)
		}
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("read a note: %w", err)
	}
	return true, nil
}

// deleteNote forgets key, within noteTimeout.
func deleteNote(ctx context.Context, notes Notes, key string) error {
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	return notes.Delete(ctx, key)
}

// toldFor is how long a reply told it was not taken is remembered: past
// the time Telegram keeps an update, Slack sends an event again, or a
// mail left unread is read again by the next instance.
const toldFor = goneFor

// tellOnce reports whether this instance is to tell the person that the
// reply named key was not taken, and then, once it has tried, finish
// (sent: whether it was told). The first to claim the reply tells, so
// that a reply handled again (its update polled again after the lead
// moved, an event sent again, a mail read again) is told once across
// the cluster. A claim is noted as such until finish notes it told: a
// claim left by an instance that died before telling lapses after
// tellClaim, and the next to handle the reply, which waits that long,
// tells it. A note that cannot be made or read just now tells anyway:
// twice is better than never.
func tellOnce(ctx context.Context, notes Notes, log *slog.Logger, key string) (tell bool, finish func(sent bool)) {
	key = "told." + key
	now := clockOf(notes)
	finish = func(sent bool) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteTimeout)
		defer cancel()
		var err error
		if sent {
			err = notes.Put(ctx, key, toldNote, now().Add(toldFor))
		} else {
			err = notes.Delete(ctx, key)
		}
		if err != nil {
			log.Warn("channel: cannot note whether a reply was told it was not taken", "err", err)
		}
	}
	anyway := func(err error) (bool, func(bool)) {
		log.Warn("channel: cannot note that a reply is told it was not taken; told, maybe again", "err", err)
		return true, func(bool) {}
	}
	deadline := time.Now().Add(tellClaim + noteTimeout)
	var wait time.Duration
	anew := false
	for {
		nctx, cancel := context.WithTimeout(ctx, noteTimeout)
		created, err := notes.Create(nctx, key, claimNote, now().Add(tellClaim))
		var v []byte
		found := false
		if err == nil && !created {
			v, found, err = notes.Get(nctx, key)
		}
		cancel()
		switch {
		case err != nil:
			return anyway(err)
		case created:
			return true, finish
		case found && !bytes.Equal(v, claimNote):
			return false, nil // told (by this version or the one before)
		case time.Now().After(deadline):
			// A claim outliving its time (another instance's clock), or
			// one not read here: told here, maybe again.
			return true, func(bool) {}
		}
		if !found && !anew {
			anew = true
			continue // gone meanwhile: claimed anew, once at once
		}
		// Another instance tells it just now, or died claiming it; or a
		// claim is in the store that is not read here (its release
		// kept to be written later, laterNotes): waited out alike.
		wait = min(max(2*wait, pollRetry), pollMaxRetry)
		select {
		case <-ctx.Done():
			return anyway(ctx.Err())
		case <-time.After(wait):
		}
	}
}

// tellClaim is how long a claim to tell a reply it was not taken holds:
// longer than telling takes, short enough for the next handling of the
// reply to wait out one whose instance died.
const tellClaim = 15 * time.Second

// claimNote and toldNote are the values of a reply's told note: claimed
// (being told), and told.
var claimNote, toldNote = []byte{2}, []byte{1}

// patiently runs try until it succeeds or fails for good, and returns
// its last error: a note that cannot be read or an answer that cannot
// be saved just now (the cluster's store out of reach, the disk full)
// is tried again, with backoff, for up to retryFor (longer than a
// lease: the store may be back, or another instance lead, by then).
// For the channels whose service does not hold an event until it is
// handled (Telegram's poll does: telegram_poll.go).
func patiently(ctx context.Context, try func() error) error {
	var wait time.Duration
	start := time.Now()
	for {
		err := try()
		if err == nil || !passing(err) || time.Since(start) >= retryFor {
			return err
		}
		wait = min(max(2*wait, pollRetry), pollMaxRetry)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// errNoteUnread: a note could not be read (its store out of reach).
var errNoteUnread = errors.New("the question it answers could not be looked up just now")

// errNoteMissing: a message of the bot's own has no note (yet).
var errNoteMissing = errors.New("the message it answers has no note yet")

// passing: err may pass if tried again.
func passing(err error) bool {
	return errors.Is(err, errNoteUnread) || errors.Is(err, errNoteMissing) || answercap.Unsaved(err) && !errors.Is(err, hub.ErrTooLarge)
}

// mayCome reports whether a note missing from notes may still come: the
// notes are a cluster's, and the instance that sent the message may keep
// its note until the store takes it (laterNotes), a moment after NATS is
// back. A reply to one of the bot's own messages whose note is missing
// is then tried again for a while (retryFor) before it is told it
// answers nothing; in one process's notes a missing note is missing for
// good.
func mayCome(notes Notes) bool {
	l, ok := notes.(*laterNotes)
	return ok && l.shared
}

// notesLost says a note could not be written (nor kept to be written
// later) since the process started: a message of the bot's whose
// question is not noted may be one still waiting, sent just then.
func notesLost(notes Notes) bool {
	l, ok := notes.(*laterNotes)
	return ok && l.lost.Load()
}

// unnoted is why a reply to a message whose question is not noted is
// not taken, once notes were lost (notesLost): the message may ask one
// still waiting.
const unnoted = "the question of the message you replied to is not known here: it was answered, withdrawn or timed out, or it could not be noted when it was sent (the server could not write its notes then). If it still waits, answer it in the app."

// unnotedTap is unnoted for a tap on a button (at most 200 characters,
// as a tap's answer).
const unnotedTap = "This button's question is not known here: answered, withdrawn or timed out, or not noted when sent (the server could not write its notes then). If it still waits, answer it in the app."

// expiresOf is when the question of ev stops waiting: its timeout, or a
// day.
func expiresOf(ev hub.Event) time.Time {
	if ev.Request.Timeout <= 0 {
		return ev.AskedAt.Add(24 * time.Hour)
	}
	return ev.AskedAt.Add(ev.Request.Timeout)
}
