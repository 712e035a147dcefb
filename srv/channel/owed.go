package channel

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Follow-ups owed. A channel that follows a question up once it is
// settled (Telegram and Slack edit its message, ntfy replaces its
// notification, e-mail sends a mail in its thread) owes that follow-up
// until it was made: else the message keeps its buttons, and a tap on
// one, later, is told the question is no longer pending; the phone
// keeps ringing for a question answered; the mailbox never hears it
// was. Each question a channel was sent is noted (noteSent: one
// process's notes on disk, or a cluster's, under owedPrefix); the note
// is marked with the outcome before the follow-up is tried, and marked
// made once it was (kept madeFor, so that a settle heard twice, by the
// queue and by a restart's restoreOwed, is followed up once). A
// follow-up that failed every try (the service out of reach) is tried
// again, with backoff up to owedMaxWait, until it is made or owedFor
// has passed since it was first owed (then the log says it was given
// up): by runOwed in one process; in a cluster by the instance holding
// the channel's lease, which reads every instance's notes (holdOwed).
// After a restart, every question noted as sent that is no longer
// pending (its follow-up marked owed, or settled as the server died,
// before the mark) is followed up then, with the outcome the store
// kept; the lease holder of a cluster does the same for an instance
// killed between a settle and its mark.

// A noting channel's questions are sent once in a cluster, their
// sending noted (asking.go); followsUp reports whether it also follows
// a question up once it is settled, which needs the note: all but a
// webhook.
type sendingOnce interface{ followsUp() bool }

func (*Telegram) followsUp() bool { return true }
func (*Slack) followsUp() bool    { return true }
func (*Ntfy) followsUp() bool     { return true }
func (*Email) followsUp() bool    { return true }
func (*Webhook) followsUp() bool  { return false }

// follows reports whether c follows a question up once it is settled.
func follows(c Channel) bool {
	f, ok := c.(sendingOnce)
	return ok && f.followsUp()
}

// sentRecord is the note that a channel was sent a question: what a
// settled notice needs to edit its message after a restart, and, once
// it is settled, its outcome (Kind not 0: the edit is owed).
type sentRecord struct {
	Room    string    `json:"r"`
	ID      string    `json:"i"`
	Slot    int       `json:"s"`
	Channel string    `json:"c"`
	ReqKind wire.Kind `json:"q,omitempty"`
	Agent   string    `json:"a,omitempty"`
	Project string    `json:"p,omitempty"`
	// Kind is the outcome; Nick who answered, through Door; At when;
	// Since when the follow-up was first owed (the give-up counts from
	// it); Done: it was made (or given up), and is not made again.
	Kind hub.EventKind `json:"k,omitempty"`
	Nick string        `json:"n,omitempty"`
	Door string        `json:"d,omitempty"`
	// Chose is what the answer chose among what the question offered
	// (answeredWith), for a follow-up that names it: the note keeps
	// neither the question's options nor the answer. Absent from a note
	// of an older version: its follow-up names none, as then.
	Chose []string  `json:"ch,omitempty"`
	At    time.Time `json:"at,omitzero"`
	Since time.Time `json:"since,omitzero"`
	Done  bool      `json:"done,omitempty"`
	// Unsent: a cluster's settle noted before its question was noted
	// sent on the channel. Its follow-up waits while a send is claimed
	// (the question may be going out just then), so that it goes after
	// the question. Once none is, it is made if a send was ever seen
	// claimed (Claimed): the question may have gone out all the same,
	// its sender killed before its note, or of the release before,
	// which leaves Unsent as it found it, and a question left with its
	// buttons is worse than a stray outcome. It is not made when no
	// instance was seen sending it: a follow-up of a question never
	// shown there would be the first the person sees of it.
	Unsent  bool `json:"u,omitempty"`
	Claimed bool `json:"uc,omitempty"`
}

// settledUnknown is the outcome of a question found settled after a
// restart whose outcome was not noted (the server died first) and is
// not known any more: its message says it is no longer pending.
const settledUnknown hub.EventKind = 255

const (
	// owedFor bounds how long an edit owed is tried: past it the
	// message is left as it is, and the log says so.
	owedFor = 48 * time.Hour
	// owedWait and owedMaxWait space the tries of an edit owed.
	owedWait    = 5 * time.Second
	owedMaxWait = 5 * time.Minute
	// maxOwed bounds the edits owed tried at a time; past it the oldest
	// waits for the next restart (its note stays), or in a cluster those
	// found past it for a scan that finds room (scanOwed).
	maxOwed = 1024
	// owedScan is how often a cluster's lease holder reads the
	// follow-ups owed noted by every instance.
	owedScan = 30 * time.Second
	// makingFor bounds a cluster's claim on a follow-up being made,
	// and followTimeout the send made under it: an instance killed as
	// it made one (its claim left) holds it up that long at most.
	makingFor     = 20 * time.Second
	followTimeout = 15 * time.Second
	// makingPrefix begins the keys of those claims.
	makingPrefix = "making."
	// madeFor is how long a follow-up made is remembered as made.
	madeFor = time.Hour
	// owedPrefix begins the keys of a cluster's edits owed, which a
	// Scanner lists.
	owedPrefix = "owed."
)

// A Scanner is a cluster's Notes that lists the values of the keys
// beginning with owedPrefix ("owed."), not past their time: the edits
// owed, found by the instance that holds a channel's lease. Scan calls
// fn with each, until fn returns an error, which Scan returns.
type Scanner interface {
	Scan(ctx context.Context, prefix string, fn func(v []byte) error) error
}

// recordOf is the note that c, the slot-th channel, was sent n.
func recordOf(c Channel, n Notice) sentRecord {
	return sentRecord{Room: store.Room(n.Token), ID: n.Request.ID, Slot: n.slot, Channel: c.Name(),
		ReqKind: n.Request.Kind, Agent: n.Request.AgentName, Project: n.Request.ProjectDirectory}
}

// event is the settle of r, for the token token.
func (r sentRecord) event(token string) hub.Event {
	ev := hub.Event{Kind: r.Kind, Token: token, At: r.At,
		Request: hub.Request{Kind: r.ReqKind, ID: r.ID, AgentName: r.Agent, ProjectDirectory: r.Project}}
	if r.Kind == hub.Answered {
		ev.Reply = &hub.Reply{Nickname: r.Nick, Door: r.Door}
	}
	return ev
}

// recorded is the settled notice of rec for c, for the token token,
// made as one heard from the hub is (Manager.notice): it names the
// question as its other notices did (Notice.Seq; ntfy replaces the
// question's notification with it) and opens the app as they do.
func (m *Manager) recorded(rec sentRecord, token string, c Channel) Notice {
	n := m.notice(rec.event(token), rec.Slot, c)
	if rec.Kind == hub.Answered {
		n.chose = rec.Chose
	}
	return n
}

// settle marks r with the outcome of n.
func (r *sentRecord) settle(n Notice) {
	r.Kind, r.At, r.Nick, r.Door, r.Chose = n.Kind, n.At, "", "", nil
	if n.Reply != nil {
		r.Nick, r.Door = nickname(n.Reply), n.Reply.Door
	}
	if n.Kind == hub.Answered {
		r.Chose = answeredWith(n)
	}
}

// withOutcome is n, settled as o says.
func withOutcome(n Notice, o hub.Outcome) Notice {
	n.Kind, n.At, n.Reason, n.Reply = o.Kind, o.At, o.Reason, nil
	if o.Kind == hub.Answered {
		n.Reply = o.Reply
	}
	return n
}

// owedItem is an edit owed, tried by runOwed.
type owedItem struct {
	c     Channel
	n     Notice
	since time.Time
	next  time.Time
	wait  time.Duration
}

// owedEdits are the follow-ups owed being tried; runOwed owns the tries.
type owedEdits struct {
	mu    sync.Mutex // held alone
	items map[string]*owedItem
	order []string // oldest first
	wake  owned.Wake
	// making are the follow-ups being made (by a channel's queue or by
	// runOwed): one at a time each, so that one made is not made again.
	making map[string]bool
}

// claim has the follow-up key made by its caller alone: false when it
// is being made already. release lets it go.
func (o *owedEdits) claim(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.making[key] {
		return false
	}
	if o.making == nil {
		o.making = map[string]bool{}
	}
	o.making[key] = true
	return true
}

func (o *owedEdits) release(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.making, key)
}

// claimMaking has c's follow-up of n's question made by this instance
// alone, in a cluster (the instance that heard the settle, and the
// lease holder that found it owed, may both be at it): false when
// another instance is making it. done lets it go. A claim that cannot
// be written (the notes out of reach) is taken as granted: a follow-up
// twice rather than never.
func (m *Manager) claimMaking(c Channel, n Notice) (ok bool, done func()) {
	if !m.shared {
		return true, func() {}
	}
	key := makingPrefix + sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
	ctx := m.goroutines.Context()
	created, err := m.o.Notes.Create(ctx, key, []byte("1"), m.o.Now().Add(makingFor))
	if err != nil {
		m.log.Warn("a settled question's follow-up not claimed; made anyway", "channel", c.Name(), "id", n.Request.ID, "err", err)
		return true, func() {}
	}
	if !created {
		return false, func() {}
	}
	return true, func() {
		if err := deleteNote(ctx, m.o.Notes, key); err != nil {
			m.log.Debug("a follow-up's claim not let go; it lapses", "err", err)
		}
	}
}

// markOwed notes, before c follows up n's question, that the follow-up
// is owed: a server that dies before it was made makes it after its
// restart. owed is false when c follows nothing up, or its question's
// sending was not noted (nothing to follow up, as far as is known, in
// one process); made, when the follow-up of this settle was made
// already (heard twice: by the queue and by a restart's restoreOwed).
func (m *Manager) markOwed(c Channel, n Notice) (owed, made bool) {
	if !follows(c) || !m.local && !m.shared || n.Kind == hub.Asked {
		return false, false
	}
	key := m.owedKey(c, n)
	var rec sentRecord
	ctx := m.goroutines.Context()
	found, err := getJSON(ctx, m.o.Notes, key, &rec)
	if err == nil && found && rec.ID != "" && rec.Done {
		return true, true
	}
	if m.shared {
		// The note of the sending, when there is one, is another
		// instance's: the follow-up owed is noted whole, Unsent unless
		// that note is there. Created if absent, so that a sending
		// noted meanwhile finds it (noteSent), not the other way round.
		had := rec
		rec = recordOf(c, n)
		rec.settle(n)
		rec.Since = m.o.Now()
		rec.Unsent = err == nil && (!found || had.Unsent)
		if rec.Unsent {
			_, held, gerr := m.o.Notes.Get(ctx, askingKey(c, n))
			rec.Claimed = held || gerr != nil
		}
		b, _ := json.Marshal(rec)
		created, err := m.o.Notes.Create(ctx, key, b, rec.Since.Add(owedFor))
		if err == nil && !created {
			found, err = getJSON(ctx, m.o.Notes, key, &had)
			if err == nil && found && had.Done {
				return true, true
			}
			rec.Unsent = err == nil && (!found || had.Unsent)
			rec.Claimed = rec.Unsent && (rec.Claimed || had.Claimed)
			err = putJSON(ctx, m.o.Notes, key, rec, rec.Since.Add(owedFor))
		}
		if err != nil {
			m.log.Warn("a settled question's follow-up not noted; if it fails, its message keeps its buttons", "channel", c.Name(), "id", n.Request.ID, "err", err)
		}
		return true, false
	}
	if err != nil || !found || rec.ID == "" {
		// Noted as sent by an older version (a bare true), or not at
		// all: the follow-up is tried as any notice is.
		return false, false
	}
	if rec.Kind == 0 || rec.Kind == settledUnknown {
		rec.settle(n)
		rec.Since = m.o.Now()
		if err := putJSON(ctx, m.o.Notes, key, rec, rec.Since.Add(owedFor)); err != nil {
			m.log.Warn("a settled question's follow-up not noted; if the server stops first, its message keeps its buttons", "channel", c.Name(), "id", n.Request.ID, "err", err)
		}
	}
	return true, false
}

// edited notes the follow-up of n's question made (or given up): it is
// not made again.
func (m *Manager) edited(c Channel, n Notice) {
	rec := recordOf(c, n)
	rec.settle(n)
	rec.Done = true
	if err := putJSON(m.goroutines.Context(), m.o.Notes, m.owedKey(c, n), rec, m.o.Now().Add(madeFor)); err != nil {
		m.log.Warn("a settled question's follow-up made, not noted so", "channel", c.Name(), "id", n.Request.ID, "err", err)
	}
}

// makeFollowUp makes c's follow-up of n's question, owed, as its note
// says now (current), and notes it made before it lets go of its claim
// on it (claimMaking): made is false, and err nil, when it was made
// meanwhile; err is errMadeElsewhere when another instance is making
// it.
func (m *Manager) makeFollowUp(c Channel, n Notice) (sent Notice, made bool, err error) {
	if n.Kind == hub.Asked { // told again (askAgain), tried as one owed
		return m.askAgain(c, n)
	}
	ok, done := m.claimMaking(c, n)
	defer done()
	if !ok {
		return n, false, errMadeElsewhere
	}
	n, todo, err := m.current(c, n)
	if !todo || err != nil {
		return n, false, err
	}
	ctx, cancel := context.WithTimeout(m.goroutines.Context(), followTimeout)
	defer cancel()
	if err := c.Send(ctx, n); err != nil {
		return n, false, err
	}
	m.edited(c, n)
	return n, true, nil
}

// current is c's follow-up of n's question to make now, as its note
// says: false when it was made meanwhile, or its question was never
// seen sent on c (Unsent, and no send ever seen claimed: noted made);
// errSending while a send of it, not yet noted, is claimed, or that
// claim cannot be read or noted seen. One owed with its outcome unknown
// (found after a restart, before the store's outcome was heard) takes
// the outcome noted or kept since.
func (m *Manager) current(c Channel, n Notice) (Notice, bool, error) {
	var rec sentRecord
	found, err := getJSON(m.goroutines.Context(), m.o.Notes, m.owedKey(c, n), &rec)
	if err == nil && found && rec.ID != "" {
		if rec.Done {
			return n, false, nil
		}
		if rec.Unsent {
			ctx := m.goroutines.Context()
			_, sending, err := m.o.Notes.Get(ctx, askingKey(c, n))
			switch {
			case err != nil:
				return n, false, errSending
			case sending:
				if !rec.Claimed {
					// Not noted now (the notes refusing writes), it is
					// noted at the next look, the claim held still.
					rec.Claimed = true
					if err := putJSON(ctx, m.o.Notes, m.owedKey(c, n), rec, rec.Since.Add(owedFor)); err != nil {
						m.log.Debug("a settled question's follow-up waits; that its question's send was claimed is not noted yet", "channel", c.Name(), "id", n.Request.ID, "err", err)
					}
				}
				return n, false, errSending
			case !rec.Claimed:
				m.edited(c, n)
				m.log.Debug("a settled question's follow-up not made: no instance was sending the question there", "channel", c.Name(), "id", n.Request.ID)
				return n, false, nil
			}
			m.log.Info("a settled question's follow-up made: its question's send was claimed, never noted", "channel", c.Name(), "id", n.Request.ID)
		}
		if n.Kind == settledUnknown && rec.Kind != 0 && rec.Kind != settledUnknown {
			n = m.recorded(rec, n.Token, c)
		}
	}
	if n.Kind == settledUnknown {
		if o, ok := m.o.Hub.Outcome(n.Token, n.Request.ID); ok {
			n = withOutcome(n, o)
		}
	}
	return n, true, nil
}

// owedKey is the note of the edit owed of n's question by c: one
// process's note that it was sent, or a cluster's of the edit.
func (m *Manager) owedKey(c Channel, n Notice) string {
	key := sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
	if m.shared {
		return owedPrefix + key
	}
	return key
}

// owe has runOwed try the edit of n's question again, from at, until it
// goes through or owedFor has passed since since.
func (m *Manager) owe(c Channel, n Notice, since, at time.Time) {
	key := sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
	if n.Kind == hub.Asked {
		key = askingPrefix + key // not its follow-up's
	}
	o := &m.owed
	o.mu.Lock()
	if o.items == nil {
		o.items = map[string]*owedItem{}
	}
	if _, ok := o.items[key]; !ok {
		if len(o.order) >= maxOwed {
			old := o.order[0]
			o.order = o.order[1:]
			delete(o.items, old)
			m.log.Warn("an edit owed put off until the next restart: too many are owed", "channel", c.Name())
		}
		o.order = append(o.order, key)
	}
	o.items[key] = &owedItem{c: c, n: n, since: since, next: at, wait: owedWait}
	o.mu.Unlock()
	o.wake.Tell()
}

// runOwed tries the edits owed, each when its wait is over, until ctx
// ends.
func (m *Manager) runOwed(ctx context.Context) {
	o := &m.owed
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := m.o.Now()
		var due []*owedItem
		var dueKeys []string
		next := now.Add(time.Hour)
		o.mu.Lock()
		for _, k := range o.order {
			it := o.items[k]
			if !it.next.After(now) {
				due, dueKeys = append(due, it), append(dueKeys, k)
			} else if it.next.Before(next) {
				next = it.next
			}
		}
		o.mu.Unlock()
		for i, it := range due {
			if !o.claim(dueKeys[i]) {
				// Its queue is making it: looked at again after.
				o.mu.Lock()
				if o.items[dueKeys[i]] == it {
					it.next = m.o.Now().Add(owedWait)
				}
				o.mu.Unlock()
				continue
			}
			n, made, err := m.makeFollowUp(it.c, it.n)
			todo := made || err != nil
			o.release(dueKeys[i])
			now := m.o.Now()
			o.mu.Lock()
			if o.items[dueKeys[i]] != it { // replaced meanwhile
				o.mu.Unlock()
				continue
			}
			done := !todo || err == nil || now.Sub(it.since) >= owedFor
			if done {
				delete(o.items, dueKeys[i])
				o.order = slices.DeleteFunc(o.order, func(k string) bool { return k == dueKeys[i] })
			} else {
				if !errors.Is(err, errMadeElsewhere) && !errors.Is(err, errSending) { // else looked at again soon
					it.wait = min(2*it.wait, owedMaxWait)
				}
				it.next = now.Add(it.wait)
				if it.next.Before(next) {
					next = it.next
				}
			}
			o.mu.Unlock()
			switch {
			case it.n.Kind == hub.Asked:
				if done && err != nil {
					m.log.Warn("a question taken over not sent: given up", "channel", it.c.Name(), "id", it.n.Request.ID, "err", err)
				} else if err != nil {
					m.log.Debug("a question taken over not sent yet", "channel", it.c.Name(), "id", it.n.Request.ID, "retry_in", it.wait, "err", err)
				}
			case !todo:
				m.log.Debug("a settled question's follow-up owed was made meanwhile", "channel", it.c.Name(), "id", it.n.Request.ID)
			case err == nil:
				m.log.Info("a settled question's follow-up made at last", "channel", it.c.Name(), "id", it.n.Request.ID, "outcome", outcomeName(n.Kind))
			case done:
				m.log.Warn("a settled question's follow-up not made: given up", "channel", it.c.Name(), "id", it.n.Request.ID, "owed_for", now.Sub(it.since).Round(time.Second), "err", err)
				m.edited(it.c, n)
			default:
				m.log.Debug("a settled question's follow-up owed, not made yet", "channel", it.c.Name(), "id", it.n.Request.ID, "retry_in", it.wait, "err", err)
			}
		}
		if len(due) > 0 {
			continue // what came due meanwhile
		}
		timer.Reset(max(next.Sub(m.o.Now()), 0))
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-timer.C:
		}
	}
}

// errMadeElsewhere: another instance of the cluster is making the
// follow-up; it is looked at again after, and found made, or not.
var errMadeElsewhere = errors.New("being made by another instance")

// errSending: a settled question's follow-up waits for its question,
// whose send is claimed (it may be going out just then).
var errSending = errors.New("its question is being sent")

// outcomeName names an outcome in the log.
func outcomeName(k hub.EventKind) string {
	if k == settledUnknown {
		return "unknown"
	}
	return k.String()
}

// recordIn is the note v of a question sent (or of its follow-up owed,
// or its first send owed), the token it is of and the channel it names,
// when v is one (not an older version's bare true) of a channel that
// follows up (or, a first send, sends once) and is routed still.
func (m *Manager) recordIn(v []byte) (rec sentRecord, tok string, c Channel, ok bool) {
	if json.Unmarshal(v, &rec) != nil || rec.ID == "" {
		return rec, "", nil, false
	}
	for t, chs := range m.o.Routes {
		if store.Room(t) != rec.Room || rec.Slot < 0 || rec.Slot >= len(chs) {
			continue
		}
		c = chs[rec.Slot]
		if (follows(c) || rec.Kind == hub.Asked && sendsOnce(c)) && c.Name() == rec.Channel {
			return rec, t, c, true
		}
	}
	return rec, "", nil, false
}

// holdOwed has runOwed try the follow-ups owed by c that a cluster
// noted, while this instance holds c's lease (until ctx ends): read now,
// then every owedScan; those tried here are let go of at the end, for
// the next holder.
func (m *Manager) holdOwed(ctx context.Context, c Channel) {
	defer m.dropOwed(c)
	s, ok := m.plain.(Scanner)
	if !ok {
		return
	}
	tick := time.NewTicker(m.o.owedScan)
	defer tick.Stop()
	for {
		m.scanOwed(ctx, s, c)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scanTimeout bounds one scan of a cluster's notes, tens of thousands
// of them read from one watch.
const scanTimeout = time.Minute

// scanOwed has runOwed try, at once, the follow-ups owed by c noted in
// s that it is not trying yet, as many as maxOwed allows: those marked owed, and those of
// questions noted as sent that the store says are settled (the
// instance that heard the settle killed before it marked them, or
// marking them now: the claim on making it, and its note once made,
// have it made once).
func (m *Manager) scanOwed(ctx context.Context, s Scanner, c Channel) {
	now := m.o.Now()
	n, found, left := 0, 0, 0
	sctx, cancel := context.WithTimeout(ctx, scanTimeout)
	err := s.Scan(sctx, owedPrefix, func(v []byte) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rec, tok, rc, ok := m.recordIn(v)
		if !ok || rc != c || rec.Done {
			return nil
		}
		key := sentNoteKey(rec.Room, rec.ID, rec.Slot, rec.Channel)
		if rec.Kind == hub.Asked {
			key = askingPrefix + key // as owe keys it
		}
		m.owed.mu.Lock()
		_, trying := m.owed.items[key]
		full := len(m.owed.items) >= maxOwed
		m.owed.mu.Unlock()
		if trying {
			return nil
		}
		if full {
			// Its note waits for a scan that finds room: putting off
			// one tried already (owe) would have the next scan put it
			// back, and put off another, every scan.
			left++
			return nil
		}
		if rec.Kind == hub.Asked {
			// A first send owed: sent as one told again (askAgain),
			// once its claim lapsed, while it is pending here; one
			// just noted is its asker's to claim first (askingGrace;
			// a clock ahead of this one's waits no longer).
			ev, shown, _ := m.o.Hub.Waiting(tok, rec.ID)
			if !shown {
				return nil
			}
			t := m.o.Now() // now is the scan's start, maybe before the note
			at := t.Add(min(max(rec.Since.Sub(t)+askingGrace, 0), askingGrace))
			m.owe(c, m.notice(ev, rec.Slot, c), now, at)
			n++
			return nil
		}
		nt := m.recorded(rec, tok, c)
		since := rec.Since
		if rec.Kind == 0 {
			if m.o.Hub.Validity(tok, []string{rec.ID})[rec.ID] {
				return nil // pending
			}
			switch o, settled := m.o.Hub.Outcome(tok, rec.ID); {
			case settled:
				nt, since = withOutcome(nt, o), o.At
			case m.o.Hub.Forgotten(tok, rec.ID):
				// Settled, and its record deleted (a history cleared,
				// a budget's eviction) before its outcome was noted:
				// told as one server tells it after a restart.
				rec.Kind, rec.At, rec.Since = settledUnknown, now, now
				nt, since = m.recorded(rec, tok, c), now
			default:
				return nil
			}
			found++
		}
		m.owe(c, nt, since, now)
		n++
		return nil
	})
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil { // those read before are tried; the rest at the next scan
		m.log.Warn("the follow-ups owed cannot be read just now", "channel", c.Name(), "err", err)
	}
	if n > 0 {
		m.log.Info("follow-ups owed are tried here, the channel's lease holder", "channel", c.Name(), "follow_ups", n, "found_settled", found)
	}
	if left > 0 {
		m.log.Warn("follow-ups owed wait for a later scan: too many are tried at once", "channel", c.Name(), "waiting", left, "tried_at_most", maxOwed)
	}
}

// dropOwed stops trying the follow-ups owed by c: another instance
// holds its lease now, and tries them.
func (m *Manager) dropOwed(c Channel) {
	o := &m.owed
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, it := range o.items {
		if it.c == c && it.n.Kind != hub.Asked { // a question told again is this instance's
			delete(o.items, k)
			o.order = slices.DeleteFunc(o.order, func(x string) bool { return x == k })
		}
	}
}

// A scanning Notes lists its values under a prefix: one process's, to
// find the follow-ups owed after a restart.
type scanning interface {
	scan(prefix string) ([][]byte, error)
}

// restoreOwed has the follow-ups owed before a restart tried: those
// marked owed, and those of questions noted as sent that are no longer
// pending (settled as the server died, before the mark), with the
// outcome the store kept. One whose outcome is not known here yet (a
// request timed out or withdrawn as it is restored, whose event comes
// a moment later) is tried after owedWait, with the outcome noted or
// known by then (current): "no longer pending" only when none is.
func (m *Manager) restoreOwed() {
	s, ok := m.plain.(scanning)
	if !ok {
		return
	}
	values, err := s.scan("sent.")
	if err != nil {
		m.log.Warn("the follow-ups owed before the restart cannot be read", "err", err)
		return
	}
	ctx := m.goroutines.Context()
	now := m.o.Now()
	n := 0
	for _, v := range values {
		rec, tok, c, ok := m.recordIn(v)
		if !ok || rec.Done {
			continue
		}
		at := now
		if rec.Kind == 0 {
			if m.o.Hub.Validity(tok, []string{rec.ID})[rec.ID] {
				continue // pending: nothing owed
			}
			o, known := m.o.Hub.Outcome(tok, rec.ID)
			if !known {
				rec.Kind, rec.At, rec.Since = settledUnknown, now, now
				at = now.Add(owedWait)
			} else {
				nt := withOutcome(m.recorded(rec, tok, c), o)
				rec.settle(nt)
				rec.Since = now
				// Noted: the outcome is known after the next restart
				// too, past the time the store keeps it in memory.
				key := sentNoteKey(rec.Room, rec.ID, rec.Slot, rec.Channel)
				if err := putJSON(ctx, m.o.Notes, key, rec, now.Add(owedFor)); err != nil {
					m.log.Warn("a settled question's follow-up not noted", "channel", c.Name(), "id", rec.ID, "err", err)
				}
			}
		}
		m.owe(c, m.recorded(rec, tok, c), rec.Since, at)
		n++
	}
	if n > 0 {
		m.log.Info("follow-ups owed before the restart are tried again", "follow_ups", n)
	}
}
