package channel

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Edits owed. A channel whose message is edited once its question is
// settled (Telegram's message, Slack's) owes that edit until it went
// through: else the message keeps its buttons, and a tap on one, later,
// is told the question is no longer pending. One process (its notes on
// disk) notes each question a channel was sent (noteSent); the note is
// marked with the outcome before the edit is tried, and forgotten once
// it went through. An edit that failed every try (the service out of
// reach) is tried again here, with backoff up to owedMaxWait, until it
// goes through or owedFor has passed since it was first owed (then the
// log says it was given up); and after a restart, every question noted
// as sent that is no longer pending (its edit marked owed, or settled
// as the server died, before the mark) is edited then.

// An editing channel edits a question's message once it is settled.
type editing interface{ edits() }

func (*Telegram) edits() {}
func (*Slack) edits()    {}

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
	// Kind is the outcome; Nick who answered; At when; Since when the
	// edit was first owed (the give-up counts from it).
	Kind  hub.EventKind `json:"k,omitempty"`
	Nick  string        `json:"n,omitempty"`
	At    time.Time     `json:"at,omitzero"`
	Since time.Time     `json:"since,omitzero"`
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
	// waits for the next restart (its note stays).
	maxOwed = 1024
	// owedScan is how often a cluster's lease holder reads the edits
	// owed noted by every instance.
	owedScan = 30 * time.Second
	// owedPrefix begins the keys of a cluster's edits owed, which a
	// Scanner lists.
	owedPrefix = "owed."
)

// A Scanner is a cluster's Notes that lists the values of the keys
// beginning with owedPrefix ("owed."), not past their time: the edits
// owed, found by the instance that holds a channel's lease.
type Scanner interface {
	Scan(ctx context.Context, prefix string) ([][]byte, error)
}

// recordOf is the note that c, the slot-th channel, was sent n.
func recordOf(c Channel, n Notice) sentRecord {
	return sentRecord{Room: store.Room(n.Token), ID: n.Request.ID, Slot: n.slot, Channel: c.Name(),
		ReqKind: n.Request.Kind, Agent: n.Request.AgentName, Project: n.Request.ProjectDirectory}
}

// notice is the settled notice of r, for the token token.
func (r sentRecord) notice(token string) Notice {
	ev := hub.Event{Kind: r.Kind, Token: token, At: r.At,
		Request: hub.Request{Kind: r.ReqKind, ID: r.ID, AgentName: r.Agent, ProjectDirectory: r.Project}}
	if r.Kind == hub.Answered {
		ev.Reply = &hub.Reply{Nickname: r.Nick}
	}
	return Notice{Event: ev, slot: r.Slot}
}

// owedItem is an edit owed, tried by runOwed.
type owedItem struct {
	c     Channel
	n     Notice
	since time.Time
	next  time.Time
	wait  time.Duration
}

// owedEdits are the edits owed being tried; runOwed owns the tries.
type owedEdits struct {
	mu    sync.Mutex // held alone
	items map[string]*owedItem
	order []string // oldest first
	wake  chan struct{}
}

// markOwed notes, before c edits the message of n's question, that the
// edit is owed: a server that dies before it went through edits it
// after its restart. False when c edits nothing, or its question's
// sending was not noted (nothing to edit, as far as is known).
func (m *Manager) markOwed(c Channel, n Notice) bool {
	if _, ok := c.(editing); !ok || !m.local && !m.shared || n.Kind == hub.Asked {
		return false
	}
	key := sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
	var rec sentRecord
	ctx := m.goroutines.Context()
	if m.shared {
		// No note of the sending here (the instance that sent it may
		// be another): the edit owed is noted whole.
		rec = recordOf(c, n)
		rec.Kind, rec.At, rec.Since = n.Kind, n.At, m.o.Now()
		if n.Reply != nil {
			rec.Nick = nickname(n.Reply)
		}
		if err := putJSON(ctx, m.o.Notes, m.owedKey(c, n), rec, rec.Since.Add(owedFor)); err != nil {
			m.log.Warn("a settled question's edit not noted; if it fails, its message keeps its buttons", "channel", c.Name(), "id", n.Request.ID, "err", err)
		}
		return true
	}
	found, err := getJSON(ctx, m.o.Notes, key, &rec)
	if err != nil || !found || rec.ID == "" {
		// Noted as sent by an older version (a bare true), or not at
		// all: the edit is tried as any notice is.
		return false
	}
	if rec.Kind == 0 {
		rec.Kind = n.Kind
		if n.Reply != nil {
			rec.Nick = nickname(n.Reply)
		}
		rec.At, rec.Since = n.At, m.o.Now()
		if err := putJSON(ctx, m.o.Notes, key, rec, rec.Since.Add(owedFor)); err != nil {
			m.log.Warn("a settled question's edit not noted; if the server stops first, its message keeps its buttons", "channel", c.Name(), "id", n.Request.ID, "err", err)
		}
	}
	return true
}

// edited forgets the edit owed of n's question, done.
func (m *Manager) edited(c Channel, n Notice) {
	if err := deleteNote(m.goroutines.Context(), m.o.Notes, m.owedKey(c, n)); err != nil {
		m.log.Warn("a settled question's edit done, not forgotten", "channel", c.Name(), "id", n.Request.ID, "err", err)
	}
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
	select {
	case o.wake <- struct{}{}:
	default:
	}
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
			err := m.sendOnce(it.c, it.n)
			now := m.o.Now()
			o.mu.Lock()
			if o.items[dueKeys[i]] != it { // replaced meanwhile
				o.mu.Unlock()
				continue
			}
			done := err == nil || now.Sub(it.since) >= owedFor
			if done {
				delete(o.items, dueKeys[i])
				o.order = without(o.order, dueKeys[i])
			} else {
				it.wait = min(2*it.wait, owedMaxWait)
				it.next = now.Add(it.wait)
				if it.next.Before(next) {
					next = it.next
				}
			}
			o.mu.Unlock()
			switch {
			case err == nil:
				m.log.Info("a settled question's message edited at last", "channel", it.c.Name(), "id", it.n.Request.ID)
				m.edited(it.c, it.n)
			case done:
				m.log.Warn("a settled question's message left unedited: given up", "channel", it.c.Name(), "id", it.n.Request.ID, "owed_for", now.Sub(it.since).Round(time.Second), "err", err)
				m.edited(it.c, it.n)
			default:
				m.log.Debug("a settled question's edit owed, not done yet", "channel", it.c.Name(), "id", it.n.Request.ID, "retry_in", it.wait, "err", err)
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

func without(keys []string, k string) []string {
	for i, x := range keys {
		if x == k {
			return append(keys[:i], keys[i+1:]...)
		}
	}
	return keys
}

// recordIn is the note v of a question sent (or of its edit owed), the
// token it is of and the channel it names, when v is one (not an older
// version's bare true) of a channel that edits and is routed still.
func (m *Manager) recordIn(v []byte) (rec sentRecord, tok string, c Channel, ok bool) {
	if json.Unmarshal(v, &rec) != nil || rec.ID == "" {
		return rec, "", nil, false
	}
	for t, chs := range m.o.Routes {
		if store.Room(t) != rec.Room || rec.Slot < 0 || rec.Slot >= len(chs) {
			continue
		}
		c = chs[rec.Slot]
		if _, editing := c.(editing); editing && c.Name() == rec.Channel {
			return rec, t, c, true
		}
	}
	return rec, "", nil, false
}

// holdOwed has runOwed try the edits owed by c that a cluster noted,
// while this instance holds c's lease (until ctx ends): read now, then
// every owedScan; those tried here are let go of at the end, for the
// next holder.
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

// scanOwed has runOwed try the edits owed by c noted in s that it is
// not trying yet, at once.
func (m *Manager) scanOwed(ctx context.Context, s Scanner, c Channel) {
	sctx, cancel := context.WithTimeout(ctx, noteTimeout)
	values, err := s.Scan(sctx, owedPrefix)
	cancel()
	if err != nil {
		m.log.Warn("the edits owed cannot be read just now", "channel", c.Name(), "err", err)
		return
	}
	now := m.o.Now()
	n := 0
	for _, v := range values {
		rec, tok, rc, ok := m.recordIn(v)
		if !ok || rc != c || rec.Kind == 0 {
			continue
		}
		key := sentNoteKey(rec.Room, rec.ID, rec.Slot, rec.Channel)
		m.owed.mu.Lock()
		_, trying := m.owed.items[key]
		m.owed.mu.Unlock()
		if !trying {
			m.owe(c, rec.notice(tok), rec.Since, now)
			n++
		}
	}
	if n > 0 {
		m.log.Info("edits owed are tried here, the channel's lease holder", "channel", c.Name(), "edits", n)
	}
}

// dropOwed stops trying the edits owed by c: another instance holds its
// lease now, and tries them.
func (m *Manager) dropOwed(c Channel) {
	o := &m.owed
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, it := range o.items {
		if it.c == c {
			delete(o.items, k)
			o.order = without(o.order, k)
		}
	}
}

// A scanning Notes lists its values under a prefix: one process's, to
// find the edits owed after a restart.
type scanning interface {
	scan(prefix string) ([][]byte, error)
}

// restoreOwed has the edits owed before a restart tried: those marked
// owed, and those of questions noted as sent that are no longer pending
// (settled as the server died, before the mark).
func (m *Manager) restoreOwed() {
	s, ok := m.plain.(scanning)
	if !ok {
		return
	}
	values, err := s.scan("sent.")
	if err != nil {
		m.log.Warn("the edits owed before the restart cannot be read", "err", err)
		return
	}
	now := m.o.Now()
	n := 0
	for _, v := range values {
		rec, tok, c, ok := m.recordIn(v)
		if !ok {
			continue
		}
		if rec.Kind == 0 {
			if m.o.Hub.Validity(tok, []string{rec.ID})[rec.ID] {
				continue // pending: nothing owed
			}
			rec.Kind, rec.At, rec.Since = settledUnknown, now, now
			if rep, ok := m.o.Hub.Answered(tok, rec.ID); ok {
				rec.Kind, rec.Nick = hub.Answered, nickname(rep)
			}
		}
		m.owe(c, rec.notice(tok), rec.Since, now) // at once
		n++
	}
	if n > 0 {
		m.log.Info("edits owed before the restart are tried again", "edits", n)
	}
}
