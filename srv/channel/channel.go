// Package channel takes the core's events to services a person already
// has open (ntfy, a webhook, Telegram, Slack, e-mail): each is a
// Channel, an adapter that delivers a Notice and may hand answers back,
// which compete under first-reply-wins like any device's (through a
// capability of srv/answercap, or the channel's own signed entry).
//
// Goroutines: one per channel, which sends its notices in order, trying
// again with backoff a bounded number of times (once while the channel
// is down: its last notice failed every try), and one more for each
// channel that takes answers (Listener), and one that writes the notes
// that could not be written when they were made (laterNotes); Close
// stops them and waits. The hub's events only queue: a channel that is
// down, slow or refusing delays neither the inbox nor another channel.
package channel

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Channel delivers notices to one outside service.
type Channel interface {
	// Name names it in logs and in the answers it brings ("ntfy").
	Name() string
	// Send delivers n; an error is tried again later, with backoff.
	Send(ctx context.Context, n Notice) error
}

// An offering channel shows its capability to more than the person (an
// ntfy topic's readers read its buttons' bodies): the capability answers
// only with what offers says its buttons offer, none when it is empty.
type offering interface {
	offers(req hub.Request) []string
}

// Notice is one event of a token's room, as a channel sends it.
type Notice struct {
	hub.Event
	// Cap, for a question asked, is the capability its buttons answer
	// with (srv/answercap; good once; Answers.ByCap), "" otherwise;
	// AnswerURL is where a button outside the server posts it, "" when
	// the server's public address is not set.
	Cap, AnswerURL string
	// AppURL opens the app (no token: the app keeps it).
	AppURL string
	// Seq names the question in each of its notices, telling nothing of
	// its token or ID to whoever reads them (answercap.Store.Label):
	// ntfy's sequence ID, so the notice that it is settled replaces the
	// question's; the tag Telegram's and Slack's buttons carry
	// (telegram_tag.go).
	Seq string
	// Test marks -check-channels' message: no server waits for an answer
	// to it, so it invites none.
	Test bool

	// slot is the channel's place among its token's (Options.Routes),
	// which names it in the note that it was sent the question.
	slot int
	// chose, of a settled notice made from its note after a restart
	// (Manager.recorded), is what the answer chose as noted: the note
	// keeps neither the answer nor the question's options.
	chose []string
}

// A Listener is a channel that also takes answers (a chat's buttons and
// replies): Listen runs until ctx ends, answering through a.
type Listener interface {
	Listen(ctx context.Context, a Answers)
}

// Answers is how a channel answers: a button's capability, or a reply to
// a question of a token it serves.
type Answers struct {
	hub  *hub.Hub
	caps *answercap.Store
	now  func() time.Time
	// tokens are the tokens routed, by room: a note names a question's
	// room, never its token.
	tokens map[string]string
}

// token is the token of room, when it is one the channels serve.
func (a Answers) token(room string) (string, bool) {
	t, ok := a.tokens[room]
	return t, ok
}

// ByCap answers with the capability named (good once; answercap.ErrVoid
// when it is not).
func (a Answers) ByCap(ctx context.Context, name, text string) error {
	_, err := a.caps.Use(ctx, a.hub, name, text, a.now())
	return err
}

// ByCapAll answers with the capability named and several texts, one
// content each: the options ticked of a question that takes several.
func (a Answers) ByCapAll(ctx context.Context, name string, texts []string) error {
	_, err := a.caps.UseAll(ctx, a.hub, name, texts, a.now())
	return err
}

// ReplyWith answers the question id of token with contents (text and
// images), from who.
func (a Answers) ReplyWith(ctx context.Context, token string, kind wire.Kind, id string, contents []*pb.McpResultContent, who, whoID, door string) error {
	return a.hub.Answer(ctx, token, kind, id, hub.Reply{Contents: contents, ClientID: door + ":" + whoID, Nickname: who, Door: door})
}

func textContent(text string) *pb.McpResultContent {
	return &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: text}}
}

// logOf is a channel's Logger, or one that discards when it has none.
func logOf(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Options configure a Manager. Hub is required.
type Options struct {
	Hub *hub.Hub
	// Caps makes the capabilities; nil: a store of the Manager's own.
	Caps *answercap.Store
	// Routes are each token's channels.
	Routes map[string][]Channel
	// PublicURL is the server's address as the person's phone reaches it
	// (https://aa.example.org), for buttons and links; "" leaves them out.
	PublicURL string
	// Notes keep which message asks which question, where the instance
	// that takes the reply finds it; nil: in memory (one process). A
	// note that cannot be written just now is kept here and written once
	// they answer (laterNotes). One process keeps them in its data
	// directory (FileNotes), across a restart.
	Notes Notes
	// Leader runs each service's inbound side (Telegram's poll, the
	// mailbox's watch, Slack's socket) on one instance at a time; nil:
	// here (one process).
	Leader Leader
	// AfterRestore holds the answers (each Listener) until Restored is
	// called: a server that restores its requests from its data
	// directory after New takes no answer before it knows its questions
	// (one taken before would be told its question is not pending).
	AfterRestore bool
	// Tries bounds the sends of one notice (default 5); Backoff is the
	// wait before the second (default 1s, doubling up to a minute).
	Tries   int
	Backoff time.Duration
	Logger  *slog.Logger
	Now     func() time.Time

	// owedScan is how often a cluster's lease holder reads the
	// follow-ups owed (default owedScan).
	owedScan time.Duration
}

// queueLen bounds the notices waiting for one channel; past it the
// oldest is dropped, and said so.
const queueLen = 256

// sendTimeout bounds one send.
const sendTimeout = 30 * time.Second

// Manager follows the hub's events into the channels.
type Manager struct {
	o      Options
	log    *slog.Logger
	unsub  func()
	queues map[Channel]*queue // written by New only
	// drops bounds the lines saying a queue was full: one a minute a
	// channel, with the count dropped meanwhile.
	drops window
	// goroutines are the channels' senders and listeners: Close ends
	// their Context (a Listen, a send in flight) and waits for them.
	goroutines owned.Group
	// local: the notes are one process's, kept across a restart; a
	// question sent is noted, so that Restored knows those that were not.
	local bool
	// shared: the notes are a cluster's, which list the follow-ups owed
	// (Scanner): the holder of a following channel's lease tries them.
	shared bool
	// restored is closed by Restored: the listeners wait for it when
	// Options.AfterRestore is set.
	restored     chan struct{}
	restoredOnce sync.Once
	// plain are the notes as given (not laterNotes), for restoreOwed to
	// scan; owed are the follow-ups owed tried again (owed.go).
	plain Notes
	owed  owedEdits
	// refusals are the credentials its channels' services refuse now.
	refusals *refusals
	// id names this Manager in the claims on sending a question
	// (asking.go).
	id string
}

type queue struct {
	ch Channel
	q  chan Notice
	// down: a notice failed every try, and none has been delivered
	// since; undelivered counts the notices lost meanwhile. Both are the
	// queue's goroutine's own.
	down        bool
	undelivered int
	// downNow is down, for States.
	downNow atomic.Bool

	// refused: the service refuses the channel's credential (refused.go).
	// Its notices are held meanwhile, oldest first, at most queueLen
	// (lost counts those dropped past it); the oldest is tried again at
	// retryAt, its wait doubling, or at once when the channel's listener
	// finds the credential accepted (again). All the queue's goroutine's.
	refused *RefusedError
	held    []Notice
	lost    int
	wait    time.Duration
	retryAt time.Time
	again   <-chan struct{}
}

// New starts a goroutine per channel and follows the hub's events.
func New(o Options) *Manager {
	if o.Caps == nil {
		o.Caps = answercap.New()
	}
	opt.Default(&o.Tries, 5)
	opt.Default(&o.Backoff, time.Second)
	opt.Logger(&o.Logger)
	opt.Clock(&o.Now)
	opt.Default(&o.owedScan, owedScan)
	_, local := o.Notes.(interface{ oneProcess() })
	shared := o.Notes != nil && !local
	if o.Notes == nil {
		o.Notes = NewMemoryNotes(o.Now)
	}
	plain := o.Notes
	later := newLaterNotes(o.Notes, o.Now, o.Logger)
	later.shared = shared
	o.Notes = later
	if o.Leader == nil {
		o.Leader = Alone{}
	}
	linkWebhooks(o.Routes)
	_, scans := plain.(Scanner)
	m := &Manager{o: o, log: o.Logger, queues: map[Channel]*queue{}, local: local, shared: shared && scans, restored: make(chan struct{}), plain: plain, id: instanceID()}
	m.owed.wake = owned.NewWake()
	m.refusals = newRefusals(o.Logger, o.Now)
	if !o.AfterRestore {
		close(m.restored)
	}
	for _, chs := range o.Routes {
		for _, c := range chs {
			if m.queues[c] == nil {
				q := &queue{ch: c, q: make(chan Notice, queueLen)}
				m.queues[c] = q
				m.goroutines.Go(func() { m.run(q) })
			}
		}
	}
	a := Answers{hub: o.Hub, caps: o.Caps, now: o.Now, tokens: map[string]string{}}
	for tok := range o.Routes {
		a.tokens[store.Room(tok)] = tok
	}
	for c := range m.queues {
		if n, ok := c.(noting); ok {
			n.useNotes(o.Notes)
		}
		if r, ok := c.(refusing); ok {
			r.useRefusals(m.refusals)
		}
	}
	ctx := m.goroutines.Context()
	m.goroutines.Go(func() { later.run(ctx) })
	if local || m.shared {
		m.goroutines.Go(func() { m.runOwed(ctx) })
	}
	for c := range m.queues {
		l, ok := c.(Listener)
		if e, mail := c.(*Email); mail && e.IMAPAddr == "" {
			ok = false // it takes no replies: its Listen returns at once
		}
		if !ok {
			// One that takes no answers (ntfy, a webhook) still has a
			// lease in a cluster: its holder makes the follow-ups, and
			// the first sends, owed.
			if ld, leads := c.(leading); leads && sendsOnce(c) && m.shared {
				m.goroutines.Go(func() { o.Leader.Lead(ctx, ld.lead(), func(ctx context.Context) { m.holdOwed(ctx, c) }) })
			}
			continue
		}
		if ld, ok := c.(leading); ok {
			name := ld.lead()
			run := func(ctx context.Context) { l.Listen(ctx, a) }
			if follows(c) && m.shared {
				run = func(ctx context.Context) { m.leadFollowing(ctx, c, l, a) }
			}
			m.goroutines.Go(func() {
				if m.waitRestored(ctx) {
					o.Leader.Lead(ctx, name, run)
				}
			})
			continue
		}
		m.goroutines.Go(func() {
			if m.waitRestored(ctx) {
				l.Listen(ctx, a)
			}
		})
	}
	m.unsub = o.Hub.Subscribe(m.event)
	return m
}

// leadFollowing is the lead of a following channel c of a cluster: it
// listens, and has the follow-ups owed noted by any instance tried
// here, until ctx ends (the lease lost) or the listening gives up.
func (m *Manager) leadFollowing(ctx context.Context, c Channel, l Listener, a Answers) {
	hctx, cancel := context.WithCancel(ctx)
	var owed sync.WaitGroup
	// holdOwed is owned here: waited for before the lease is let go,
	// so that two holders never try the same edits.
	owed.Go(func() { m.holdOwed(hctx, c) })
	l.Listen(ctx, a)
	cancel()
	owed.Wait()
}

// Close stops following the hub and the channels' goroutines, and waits
// for them. Idempotent.
func (m *Manager) Close() {
	m.unsub()
	m.goroutines.Close()
}

// event queues the notice of ev for each channel of its token. A
// question told again (its request taken over here) is sent by a
// following channel or a webhook of a cluster only if the instance that
// asked it did not (askAgain); by the others not at all: a message sent
// again would be a second one.
func (m *Manager) event(ev hub.Event) {
	for i, c := range m.o.Routes[ev.Token] {
		if !ev.Again {
			m.enqueue(ev, i, c)
		} else if m.shared && sendsOnce(c) {
			now := m.o.Now()
			m.owe(c, m.notice(ev, i, c), now, now)
		}
	}
}

// enqueue queues the notice of ev for c, the slot-th channel of its
// token.
func (m *Manager) enqueue(ev hub.Event, slot int, c Channel) {
	n := m.notice(ev, slot, c)
	q := m.queues[c]
	for {
		select {
		case q.q <- n:
		default:
			select {
			case <-q.q:
				if ok, more := m.drops.allow(c.Name(), 1, time.Minute, m.o.Now()); ok {
					m.log.Warn("channel notice dropped: its queue is full", "channel", c.Name(), "untold", more)
				}
			default:
			}
			continue
		}
		break
	}
}

// seqOf is the Seq of the notices of question id of room.
func (m *Manager) seqOf(room, id string) string { return m.o.Caps.Label("ntfy", room, id) }

// notice is the notice of ev for c, the slot-th channel of its token;
// a question's carries a capability made for c.
func (m *Manager) notice(ev hub.Event, slot int, c Channel) Notice {
	room := store.Room(ev.Token)
	n := Notice{Event: ev, slot: slot, Seq: m.seqOf(room, ev.Request.ID)}
	if m.o.PublicURL != "" {
		n.AppURL = m.o.PublicURL + "/"
	}
	if ev.Kind == hub.Asked {
		expires := expiresOf(ev)
		cp := answercap.Cap{Room: room, Kind: ev.Request.Kind, ID: ev.Request.ID, Of: ev.Request.Shown(),
			Who: shownName(c.Name()), WhoID: c.Name(), Door: c.Name(), Expires: expires}
		if o, ok := c.(offering); ok {
			cp.Answers = o.offers(ev.Request)
		}
		n.Cap = m.o.Caps.Make(ev.Token, cp, m.o.Now())
		if m.o.PublicURL != "" {
			n.AnswerURL = m.o.PublicURL + "/push/answer"
		}
	}
	return n
}

// run sends q's notices in order until Close; while the channel's
// credential is refused it holds them, and tries the oldest again now
// and then.
func (m *Manager) run(q *queue) {
	done := m.goroutines.Done()
	for {
		var retry <-chan time.Time
		var timer *time.Timer
		// With none held (its questions settled meanwhile), the refusal
		// stays, and the next notice is its try.
		if q.refused != nil && len(q.held) > 0 {
			timer = time.NewTimer(time.Until(q.retryAt))
			retry = timer.C
		}
		select {
		case <-done:
			if timer != nil {
				timer.Stop()
			}
			return
		case n := <-q.q:
			if q.refused != nil && len(q.held) > 0 {
				m.hold(q, n)
			} else {
				m.send(q, n)
			}
		case <-retry:
			m.tryRefused(q)
		case <-q.again:
			m.tryRefused(q)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// send delivers n through q's channel, trying again with backoff. A
// channel that is down (its last notice failed every try) gets one try
// a notice: every try and its backoff, for each notice, would have its
// queue fill faster than it fails, and what it delivers once it is back
// be the oldest notices, long after their questions. The log says when
// it goes down and when it delivers again, not at every notice. A
// credential refused is not tried again here: n is held (refuse).
func (m *Manager) send(q *queue, n Notice) {
	c := q.ch
	probe := q.refused != nil
	tries := m.o.Tries
	if q.down || probe {
		tries = 1
	}
	owed, made := m.markOwed(c, n)
	if made {
		m.log.Debug("a settled question's follow-up made already", "channel", c.Name(), "id", n.Request.ID)
		return
	}
	if owed {
		key := sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
		if !m.owed.claim(key) {
			// Being made from its note (runOwed, after a restart): it
			// looks at it again after, and makes it unless made.
			now := m.o.Now()
			m.owe(c, n, now, now.Add(owedWait))
			return
		}
		defer m.owed.release(key)
	}
	wait := m.o.Backoff
	for try := 1; ; try++ {
		var err error
		if owed {
			var made bool
			if _, made, err = m.makeFollowUp(c, n); err == nil && !made || errors.Is(err, errMadeElsewhere) {
				// Made meanwhile, or being made by another instance of
				// the cluster (the lease holder, from its note), where
				// it is owed again if it fails.
				return
			}
			if errors.Is(err, errSending) {
				now := m.o.Now()
				m.owe(c, n, now, now.Add(owedWait))
				return
			}
		} else if m.asking(c, n) {
			if try == 1 {
				m.oweAsking(c, n)
			}
			ok, cerr := m.claimAsking(c, n, m.id, wait)
			if cerr != nil {
				m.log.Warn("a question's sending not claimed; sent anyway", "channel", c.Name(), "id", n.Request.ID, "err", cerr)
			} else if !ok {
				m.log.Debug("a question being sent by the instance that took it over", "channel", c.Name(), "id", n.Request.ID)
				return
			} else if done, _ := m.noted(c, n); done {
				// Sent by another instance while this one held it
				// (its credential refused), or settled there first,
				// its follow-up noted owed: not sent, its claim goes.
				m.forgetAsking(c, n)
				m.releaseAsking(c, n)
				return
			}
			ctx, cancel := context.WithTimeout(m.goroutines.Context(), askTimeout)
			err = c.Send(ctx, n)
			cancel()
		} else {
			err = m.sendOnce(c, n)
		}
		if err == nil {
			m.noteSent(c, n)
			if probe {
				m.acceptedAgain(q)
			}
			if q.down {
				m.log.Info("channel delivers again", "channel", c.Name(), "undelivered", q.undelivered)
				q.down, q.undelivered = false, 0
				q.downNow.Store(false)
			}
			return
		}
		if re := refusedOf(err); re != nil || probe {
			// Another failure of a notice held is not told either: it
			// stays held, tried again after the next wait.
			if re == nil {
				re = q.refused
			}
			m.refuse(q, n, re)
			return
		}
		if try >= tries {
			if !q.down {
				m.log.Warn("channel notice not delivered; until one is, each notice is tried once", "channel", c.Name(), "kind", n.Kind, "id", n.Request.ID, "tries", try, "err", err)
				q.down = true
				q.downNow.Store(true)
			} else {
				m.log.Debug("channel notice not delivered", "channel", c.Name(), "kind", n.Kind, "id", n.Request.ID, "err", err)
			}
			q.undelivered++
			if owed {
				now := m.o.Now()
				m.owe(c, n, now, now.Add(owedWait))
			}
			return
		}
		m.log.Debug("channel notice not delivered yet", "channel", c.Name(), "try", try, "err", err)
		select {
		case <-m.goroutines.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// refuse holds n, first, and has q wait before it tries it again: the
// first wait once re is refused, a longer one when it still is. Told in
// the log once (refusals).
func (m *Manager) refuse(q *queue, n Notice, re *RefusedError) {
	if q.refused == nil {
		q.wait = refusedWait
	} else {
		q.wait = nextRefusedWait(q.wait)
	}
	q.refused = re
	q.retryAt = time.Now().Add(q.wait)
	q.again = m.refusals.refused(q.ch, re)
	q.held = append([]Notice{n}, q.held...)
	m.trimHeld(q)
}

// hold keeps n for q's channel while its credential is refused. A
// question settled while its own notice is held was never sent: both
// go, there is nothing to edit or follow up.
func (m *Manager) hold(q *queue, n Notice) {
	if n.Kind != hub.Asked {
		if i := slices.IndexFunc(q.held, func(h Notice) bool {
			return h.Kind == hub.Asked && h.Token == n.Token && h.Request.ID == n.Request.ID && h.slot == n.slot
		}); i >= 0 {
			q.held = slices.Delete(q.held, i, i+1)
			return
		}
	}
	q.held = append(q.held, n)
	m.trimHeld(q)
}

// trimHeld drops the oldest notices held past queueLen.
func (m *Manager) trimHeld(q *queue) {
	if over := len(q.held) - queueLen; over > 0 {
		q.held = slices.Delete(q.held, 0, over)
		q.lost += over
	}
}

// tryRefused tries the oldest notice held again; once it goes through,
// the others follow, in order. With none held, the next notice is tried
// as it comes.
func (m *Manager) tryRefused(q *queue) {
	if len(q.held) == 0 {
		q.refused, q.again = nil, nil
		return
	}
	n := q.held[0]
	q.held = q.held[1:]
	m.send(q, n)
	for q.refused == nil && len(q.held) > 0 {
		select {
		case <-m.goroutines.Done():
			return
		default:
		}
		n := q.held[0]
		q.held = q.held[1:]
		m.send(q, n)
	}
}

// acceptedAgain: a notice held went through; the log says so once.
func (m *Manager) acceptedAgain(q *queue) {
	m.refusals.accepted(q.ch, q.refused.Setting, "held", len(q.held)+1, "lost", q.lost)
	q.refused, q.again, q.lost = nil, nil, 0
}

// sendOnce makes one send, ended by its timeout or by Close.
func (m *Manager) sendOnce(c Channel, n Notice) error {
	ctx, cancel := context.WithTimeout(m.goroutines.Context(), sendTimeout)
	defer cancel()
	return c.Send(ctx, n)
}

// tookAlready reports whether the question q was answered by clientID
// with contents: an answer taken twice (an update polled again after
// the lead moved, a mail read again) is the person's own, accepted, and
// must not be told it was not.
func (a Answers) tookAlready(q asked, clientID string, contents []*pb.McpResultContent) bool {
	token, ok := a.token(q.Room)
	if !ok || a.hub == nil {
		return false
	}
	rep, ok := a.hub.Answered(token, q.ID)
	if !ok || rep.ClientID != clientID || len(rep.Contents) != len(contents) {
		return false
	}
	for i := range contents {
		if !proto.Equal(rep.Contents[i], contents[i]) {
			return false
		}
	}
	return true
}

// sentFor is how long the note that a question was sent is kept when
// the question has no deadline.
const sentFor = 7 * 24 * time.Hour

// sentNoteKey names the note that the slot-th channel of the room was
// sent the question id.
func sentNoteKey(room, id string, slot int, name string) string {
	return "sent." + room + "." + id + "." + strconv.Itoa(slot) + "." + name
}

// sentUntil is how long the note that n's question was sent is kept: a
// while past its question's time, so that the follow-up, owed once it
// timed out, is known (owed.go).
func sentUntil(n Notice) time.Time {
	if n.Request.Timeout <= 0 {
		return n.AskedAt.Add(sentFor)
	}
	return expiresOf(n.Event).Add(time.Hour)
}

// noteSent notes that n, a question, was delivered: one process's
// Resend then leaves it be. A note that cannot be written has the
// question sent again after a restart: twice rather than never. A
// cluster notes it for a following channel alone, among the follow-ups
// owed (owed.go), unless the settle was noted there first.
func (m *Manager) noteSent(c Channel, n Notice) {
	if n.Kind != hub.Asked || !m.local && (!m.shared || !sendsOnce(c)) {
		return
	}
	until := sentUntil(n)
	if m.shared {
		b, _ := json.Marshal(recordOf(c, n))
		ctx, cancel := context.WithTimeout(m.goroutines.Context(), noteTimeout)
		defer cancel()
		created, err := m.o.Notes.Create(ctx, m.owedKey(c, n), b, until)
		if err == nil && !created {
			// Settled as it went out: its follow-up, noted first,
			// waits for this.
			var rec sentRecord
			if found, gerr := getJSON(ctx, m.o.Notes, m.owedKey(c, n), &rec); gerr != nil || found && rec.Unsent {
				rec.Unsent, err = false, gerr
				if err == nil {
					err = putJSON(ctx, m.o.Notes, m.owedKey(c, n), rec, rec.Since.Add(owedFor))
				}
			}
		}
		if err != nil {
			m.log.Warn("a question sent not noted; if the instance that settles it dies at once, its follow-up is not made", "channel", c.Name(), "id", n.Request.ID, "err", err)
		}
		m.forgetAsking(c, n)
		return
	}
	key := sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
	if err := putJSON(m.goroutines.Context(), m.o.Notes, key, recordOf(c, n), until); err != nil {
		m.log.Warn("a question sent not noted; after a restart it is sent again", "channel", c.Name(), "id", n.Request.ID, "err", err)
		return
	}
	m.log.Debug("a question sent and noted", "channel", c.Name(), "id", n.Request.ID)
}

// waitRestored waits until Restored (Options.AfterRestore), or ctx
// ends: false then.
func (m *Manager) waitRestored(ctx context.Context) bool {
	select {
	case <-m.restored:
		return true
	case <-ctx.Done():
		return false
	}
}

// Restored is called once the hub has restored its requests
// (Hub.Restore): the answers held (Options.AfterRestore) are taken from
// then on, and the pending questions of every token are sent to those
// of its channels that were not sent them: a server killed after a
// question was saved and before its channels had it, started again on
// its data directory, sends it then. Only one process, whose notes are
// kept across a restart, knows which were sent. Idempotent.
func (m *Manager) Restored() {
	m.restoredOnce.Do(func() {
		m.resend()
		if m.local {
			m.restoreOwed()
		}
		if m.o.AfterRestore {
			close(m.restored)
		}
	})
}

// resend is Restored's sending again.
func (m *Manager) resend() {
	if !m.local {
		return
	}
	ctx := m.goroutines.Context()
	for tok, chs := range m.o.Routes {
		room := store.Room(tok)
		notes, _ := m.o.Hub.PendingMessages(tok)
		for _, p := range notes {
			ev := hub.Event{Kind: hub.Asked, Token: tok, Request: p.Request, AskedAt: p.AskedAt, At: m.o.Now()}
			for i, c := range chs {
				var sent json.RawMessage // a sentRecord, or an older version's true
				found, err := getJSON(ctx, m.o.Notes, sentNoteKey(room, p.Request.ID, i, c.Name()), &sent)
				if err == nil && found {
					continue
				}
				m.log.Info("a question sent again: the server stopped before its channel had it", "channel", c.Name(), "id", p.Request.ID)
				m.enqueue(ev, i, c)
			}
		}
	}
}
