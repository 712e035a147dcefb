package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/opt"
)

// The channels that take answers (Telegram, Slack, e-mail) in cluster
// mode. A reply reaches the instance that holds the service's inbound
// side, not always the one that sent the question, so they share, in
// JetStream:
//   - notes: which message asks which question (its room, never its
//     token), each until the question expires, a week at most; and
//     the edits owed (a settled question's message not edited yet),
//     under keys of their own (o.), which Scan lists;
//   - leases: one key per inbound side (a hash of the bot's token, the
//     mailbox, the app's token), made by the instance that takes it,
//     renewed by revision, and gone when it stops renewing (the
//     bucket's MaxAge), so that another takes over.

// The buckets of the channels.
const (
	NotesBucket  = "agentassistant_channel_notes"
	LeasesBucket = "agentassistant_channel_leases"
)

const (
	// maxNoteAge bounds how long a note is kept.
	maxNoteAge = 7 * 24 * time.Hour
	// maxNote bounds a note's value (channel.MaxNote).
	maxNote = 64 << 10
	// DefaultLease is how long a lease outlives its holder's last
	// renewal: another instance takes over within that and a renewal.
	DefaultLease = 12 * time.Second
)

// errNoteTooLarge: a value over maxNote.
var errNoteTooLarge = errors.New("a note is larger than 64 KiB")

// Channels is the channels' share of the cluster: Notes and a Leader
// (srv/channel). Safe for concurrent use.
type Channels struct {
	notes, leases jetstream.KeyValue
	instance      string
	lease, renew  time.Duration
	log           *slog.Logger
	now           func() time.Time // the cluster's clock (Cluster.Now)
}

// OpenChannels opens the channels' buckets; lease is how long a lease
// outlives its holder (0: DefaultLease), renewed every quarter of it.
func (c *Cluster) OpenChannels(ctx context.Context, lease time.Duration) (*Channels, error) {
	opt.Default(&lease, DefaultLease)
	notes, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: NotesBucket,
		Description: "agentassistant channels: which message asks which question", TTL: maxNoteAge,
		MaxValueSize: maxNote + 8})
	if err != nil {
		return nil, err
	}
	leases, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: LeasesBucket,
		Description: "agentassistant channels: which instance takes a service's answers", TTL: lease,
		MaxValueSize: 256})
	if err != nil {
		return nil, err
	}
	return &Channels{notes: notes, leases: leases, instance: c.o.Instance, lease: lease, renew: lease / 4,
		log: c.log.With("component", "channel leases"), now: c.Now}, nil
}

// keyOf is a bucket's key for a key that may hold any character and be
// long (a channel's key, a mail's Message-ID; an /mcp note): its hash.
func keyOf(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// owedPrefix begins the channel keys of the edits owed (srv/channel's
// owedPrefix): their bucket keys begin with "o.", so that Scan lists
// them.
const owedPrefix = "owed."

// noteKey is the bucket's key of a channel's note key.
func noteKey(key string) string {
	if strings.HasPrefix(key, owedPrefix) {
		return keyOf("o.", key)
	}
	return keyOf("n.", key)
}

// Scan calls fn with the value of each note, not past its time, whose
// key begins with prefix, which must be "owed." (the edits owed: the
// only notes whose bucket keys are grouped), until fn returns an error.
// Every note is listed, read from one watch of the bucket's latest
// values (no request per note, none held but the one fn is given):
// marking a follow-up owed writes its note again, last, so a listing
// cut at some count would miss the newest owed first.
func (ch *Channels) Scan(ctx context.Context, prefix string, fn func(v []byte) error) error {
	if prefix != owedPrefix {
		return fmt.Errorf("scan notes: prefix %q not listed", prefix)
	}
	return readPresent(ctx, ch.notes, "o.>", "the notes", func(e jetstream.KeyValueEntry) error {
		if v, live := liveNote(e.Value(), ch.now()); live {
			return fn(v)
		}
		return nil
	})
}

// liveNote is the value of a bucket's note, unless it is past its time
// at now.
func liveNote(v []byte, now time.Time) ([]byte, bool) {
	if len(v) < 8 {
		return nil, false
	}
	until := binary.BigEndian.Uint64(v)
	if until > math.MaxInt64 || !now.Before(time.Unix(0, int64(until))) {
		return nil, false
	}
	return v[8:], true
}

// noteValue is a note's value in the bucket: when it expires, and value.
func noteValue(value []byte, until time.Time) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), uint64(until.UnixNano())) // #nosec G115 -- a time after 1970
	return append(b, value...)
}

// Put keeps value under key until until (a week at most).
func (ch *Channels) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	if len(value) > maxNote {
		return errNoteTooLarge
	}
	if _, err := ch.notes.Put(ctx, noteKey(key), noteValue(value, until)); err != nil {
		return fmt.Errorf("put note: %w", err)
	}
	return nil
}

// Get is the value under key, unless it expired.
func (ch *Channels) Get(ctx context.Context, key string) ([]byte, bool, error) {
	e, err := ch.notes.Get(ctx, noteKey(key))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("get note: %w", err)
	}
	v, ok := liveNote(e.Value(), ch.now())
	return v, ok, nil
}

// Create keeps value under key until until, unless a note is there:
// JetStream makes the key for one of the instances that create it. A
// note past its time is replaced by revision, so that of two instances
// replacing it one does.
func (ch *Channels) Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error) {
	if len(value) > maxNote {
		return false, errNoteTooLarge
	}
	made, err := createOrTake(ctx, ch.notes, noteKey(key), noteValue(value, until), func(e jetstream.KeyValueEntry) bool {
		_, live := liveNote(e.Value(), ch.now())
		return !live
	})
	if err != nil {
		return false, fmt.Errorf("create note: %w", err)
	}
	return made, nil
}

// Delete forgets key.
func (ch *Channels) Delete(ctx context.Context, key string) error {
	if err := ch.notes.Purge(ctx, noteKey(key)); err != nil {
		return fmt.Errorf("delete note: %w", err)
	}
	return nil
}

// Lead runs run whenever this instance holds the lease of name, until
// ctx ends; run's context ends when the lease is lost (not renewed in
// time, or taken). Letting go (ctx ended) deletes the lease, so that
// another instance takes over at its next try, not after the lease.
func (ch *Channels) Lead(ctx context.Context, name string, run func(ctx context.Context)) {
	key := keyOf("l.", name)
	for {
		rev, err := ch.leases.Create(ctx, key, []byte(ch.instance))
		switch {
		case err == nil:
			ch.log.Info("leading", "lease", name, "instance", ch.instance)
			ch.hold(ctx, key, rev, run)
			ch.log.Info("no longer leading", "lease", name, "instance", ch.instance)
		case ctx.Err() != nil:
			return
		case !errors.Is(err, jetstream.ErrKeyExists):
			ch.log.Warn("cannot take a lease", "lease", name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(ch.renew):
		}
	}
}

// hold runs run while it renews the lease key, of revision rev; it
// returns once run has.
func (ch *Channels) hold(ctx context.Context, key string, rev uint64, run func(ctx context.Context)) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	// run is owned here: hold waits for it on every way out.
	go func() {
		defer close(done)
		run(rctx)
	}()
	tick := time.NewTicker(ch.renew)
	defer tick.Stop()
	for {
		select {
		case <-done: // ctx ended, or run gave up
			ch.release(key, rev)
			return
		case <-tick.C:
			uctx, ucancel := context.WithTimeout(ctx, ch.renew)
			next, err := ch.leases.Update(uctx, key, []byte(ch.instance), rev)
			ucancel()
			if err != nil {
				if ctx.Err() == nil {
					ch.log.Warn("lease lost", "err", err)
				}
				// Another instance may hold it once it lapses: stop
				// before then. Not renewed, it is let go of too.
				cancel()
				<-done
				ch.release(key, rev)
				return
			}
			rev = next
		}
	}
}

// release deletes the lease key if it is still this instance's (of
// revision rev).
func (ch *Channels) release(key string, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = ch.leases.Delete(ctx, key, jetstream.LastRevision(rev))
}
