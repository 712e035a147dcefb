package channel

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// What a channel sent of each question, kept for its edit or follow-up
// once the question is settled: Telegram's and Slack's messages (a
// chat's), e-mail's mail.

// sentQuestions are what a channel sent of each question, by
// questionKey: at most maxTracked, past which one is forgotten (its
// message then stays as it was, or its mail gets no follow-up). Safe
// for concurrent use.
type sentQuestions[V any] struct {
	mu sync.Mutex // held alone
	m  map[string]V
}

// questionKey names question id of room among a channel's.
func questionKey(room, id string) string { return room + "\x00" + id }

// get is what was sent of the question key.
func (s *sentQuestions[V]) get(key string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

// update keeps what f makes of key's value (ok: it has one), unless f
// says not to keep it; it returns the value kept.
func (s *sentQuestions[V]) update(key string, f func(v V, ok bool) (V, bool)) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[key]
	v, keep := f(old, ok)
	if !keep {
		return old
	}
	if s.m == nil {
		s.m = map[string]V{}
	}
	if !ok && len(s.m) >= maxTracked {
		for k := range s.m { // forget one
			delete(s.m, k)
			break
		}
	}
	s.m[key] = v
	return v
}

// forget drops key.
func (s *sentQuestions[V]) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// chatMsg is one message of a question in a chat, known by its key K
// (Telegram's chat and message ID, Slack's conversation and timestamp).
type chatMsg[K comparable] struct {
	key K
	// text is what it shows, for its edit once the question is settled.
	text string
	// photo: one of the question's images, sent as a reply to it (a
	// reply to it answers the question; it has no text to edit).
	photo bool
}

// A chat sends a question as messages (its copies sent again after a
// restart and learnt by their tag, telegram_tag.go, and the photos
// replying to it among them), and edits them once it is settled.
type chat[K comparable] interface {
	Channel
	notesOf() Notes
	logger() *slog.Logger
	sentOf() *sentQuestions[[]chatMsg[K]]
	// noteKey names the note of what the message k asks; sentKey, the
	// note of the messages of question id of room; copyKey, the note of
	// the copies of the question tagged tag where k is; copyKeys, those
	// notes of each place the question goes.
	noteKey(k K) string
	sentKey(room, id string) string
	copyKey(k K, tag string) string
	copyKeys(tag string) []string
	// sentNote is msgs as their note, which readSent reads back.
	sentNote(msgs []chatMsg[K]) any
	readSent(ctx context.Context, room, id string) ([]chatMsg[K], error)
}

// track notes that the message m asks q, and keeps it with q's others
// for the edit once q is settled. A note the store cannot take just now
// is written once it can (laterNotes); one that cannot even be kept for
// that is told in the log: a tap or reply to that message is then told
// it asks nothing, not taken in silence.
func track[K comparable](ctx context.Context, c chat[K], m chatMsg[K], q asked, until time.Time) {
	msgs := c.sentOf().update(questionKey(q.Room, q.ID), func(msgs []chatMsg[K], _ bool) ([]chatMsg[K], bool) {
		// (A copy learnt by its tag may be one noted meanwhile.)
		if !slices.ContainsFunc(msgs, func(o chatMsg[K]) bool { return o.key == m.key }) {
			msgs = append(slices.Clip(msgs), m)
		}
		return msgs, true
	})
	// Kept past the question's time: its edit may be owed (owed.go).
	if err := putJSON(ctx, c.notesOf(), c.sentKey(q.Room, q.ID), c.sentNote(msgs), until.Add(owedFor)); err != nil {
		c.logger().Warn(c.Name()+": a question's messages not noted; another instance will not edit them", "err", err)
	}
	if err := putJSON(ctx, c.notesOf(), c.noteKey(m.key), q, until); err != nil {
		c.logger().Warn(c.Name()+": what a message asks not noted; a reply to it answers nothing", "err", err)
	}
}

// recall takes back the messages of question id of room noted before a
// restart (or by another instance), so that a question sent again is
// not sent where it is.
func recall[K comparable](ctx context.Context, c chat[K], room, id string) {
	key := questionKey(room, id)
	if _, known := c.sentOf().get(key); known {
		return
	}
	msgs, err := c.readSent(ctx, room, id)
	if err != nil || len(msgs) == 0 {
		return
	}
	c.sentOf().update(key, func(_ []chatMsg[K], ok bool) ([]chatMsg[K], bool) { return msgs, !ok })
}

// byTag is what the copy at of the question tagged tag asks, when no
// note names the message itself: one whose send never told its key. A
// copy of a question still pending is noted from then on (learnt), for
// its edit once it is settled.
func byTag[K comparable](ctx context.Context, c chat[K], at K, tag string) (asked, bool, error) {
	if tag == "" {
		return asked{}, false, nil
	}
	var tn tagNote
	ok, err := getJSON(ctx, c.notesOf(), c.copyKey(at, tag), &tn)
	if err != nil || !ok {
		return asked{}, false, err
	}
	if tn.Gone == "" {
		// With the copies noted, here or by the instance that sent them.
		recall(ctx, c, tn.Room, tn.ID)
		msgs, _ := c.sentOf().get(questionKey(tn.Room, tn.ID))
		if !slices.ContainsFunc(msgs, func(m chatMsg[K]) bool { return m.key == at }) {
			c.logger().Info(c.Name()+": a copy of a question whose message was never noted is answered; it is noted now", "id", tn.ID)
		}
		track(ctx, c, chatMsg[K]{key: at, text: tn.Shown}, tn.asked, tn.Until)
	}
	return tn.asked, true, nil
}

// settledMsgs are the messages of n's question, settled, once their
// notes and their copies' tags say so: their taps, presses and replies
// answer nothing now, and are told why; one read again (delivered
// twice) is told from another by the outcome, so the notes keep the
// labels. The messages are kept here, or noted: the question was
// settled on another instance than the one that sent it (an outcome is
// told where it is written), or after a restart.
func settledMsgs[K comparable](ctx context.Context, c chat[K], n Notice, room string) ([]chatMsg[K], error) {
	msgs, ok := c.sentOf().get(questionKey(room, n.Request.ID))
	if !ok {
		var err error
		if msgs, err = c.readSent(ctx, room, n.Request.ID); err != nil {
			return nil, err
		}
	}
	notes := c.notesOf()
	for _, m := range msgs {
		gone, found, err := getAsked(ctx, notes, c.noteKey(m.key))
		if err != nil || !found {
			gone = asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID}
		}
		gone.Gone = title(n)
		if err := putJSON(ctx, notes, c.noteKey(m.key), gone, n.At.Add(goneFor)); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name(), err)
		}
	}
	for _, key := range c.copyKeys(n.Seq) {
		var tn tagNote
		if ok, err := getJSON(ctx, notes, key, &tn); err != nil || !ok || tn.Gone != "" {
			continue
		}
		tn.Gone = title(n)
		if err := putJSON(ctx, notes, key, tn, n.At.Add(goneFor)); err != nil {
			c.logger().Warn(c.Name()+": a settled question's note not changed", "err", err)
		}
	}
	return msgs, nil
}

// forgetSent forgets the messages of question id of room, edited.
func forgetSent[K comparable](ctx context.Context, c chat[K], room, id string) {
	c.sentOf().forget(questionKey(room, id))
	if err := deleteNote(ctx, c.notesOf(), c.sentKey(room, id)); err != nil {
		c.logger().Warn(c.Name()+": a settled question's note not forgotten", "err", err)
	}
}
