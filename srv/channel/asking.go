package channel

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// A question sent once in a cluster. The instance that asked a question
// sends it; killed before its send went out (the service busy, its
// retry waiting), it sends nothing, and the instance the agent
// re-attaches through, taking the request over, is told it again
// (hub.Event.Again). Each sender of a following channel, or of a
// webhook, claims the sending in the cluster's notes first
// (askingPrefix), for one try and the wait before the next (askingFor),
// and claims it again at each try; the claim of one killed lapses. Told
// again, an instance sends the question unless it was sent (its note
// among the follow-ups owed, noteSent), is no longer pending, or
// another holds the claim: then it looks again after owedWait
// (runOwed), until one of those, or the claim lapsed and is its own.
// The asker alive and slow holds its claim and sends; the instance told
// again then finds it sent.
//
// The first send is also noted owed, among the follow-ups owed, before
// it is first claimed (oweAsking), until it was sent (noteSent forgets
// it): the instance holding the channel's lease finds it there
// (scanOwed) and sends it as one told again (not before askingGrace
// from its note: its asker claims it then), once the claim lapsed, when
// the instance that took the request over was killed too, or the agent
// never came back through another.

const (
	// askingPrefix begins the keys of the claims on sending a question.
	askingPrefix = "asking."
	// askingFor is a claim's time past the try it is made for, and the
	// bound of that try (askTimeout).
	askingFor  = makingFor
	askTimeout = followTimeout
)

// askingGrace is the time the lease holder leaves a first send noted
// owed to its asker (scanOwed), which claims it a moment after noting
// it: taken at once, a question every instance is well would be sent
// by another than its asker (once all the same, by the claim).
const askingGrace = owedWait

// asking reports whether n is a question c sends in a cluster under a
// claim (sendsOnce).
func (m *Manager) asking(c Channel, n Notice) bool {
	return m.shared && sendsOnce(c) && n.Kind == hub.Asked
}

// sendsOnce reports whether c's questions are sent once in a cluster,
// their sending noted (sendingOnce).
func sendsOnce(c Channel) bool {
	_, once := c.(sendingOnce)
	return once
}

// askingKey is the key of the claim on c's sending of n's question;
// owedPrefix before it, of its note that the send is owed.
func askingKey(c Channel, n Notice) string {
	return askingPrefix + sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
}

// oweAsking notes that c owes the first send of n's question, unless it
// is noted already. Not noted (the notes out of reach), it is sent as
// before, by its asker or by the instance told it again.
func (m *Manager) oweAsking(c Channel, n Notice) {
	rec := recordOf(c, n)
	rec.Kind, rec.Since = hub.Asked, m.o.Now()
	b, _ := json.Marshal(rec)
	ctx, cancel := context.WithTimeout(m.goroutines.Context(), noteTimeout)
	defer cancel()
	if _, err := m.o.Notes.Create(ctx, owedPrefix+askingKey(c, n), b, sentUntil(n)); err != nil {
		m.log.Warn("a question's first send not noted owed; if its sender is killed before it sends, the next one the agent comes through sends it", "channel", c.Name(), "id", n.Request.ID, "err", err)
	}
}

// noted reports whether n's question was noted sent by c.
func (m *Manager) noted(c Channel, n Notice) (bool, error) {
	_, found, err := m.o.Notes.Get(m.goroutines.Context(), m.owedKey(c, n))
	return found, err
}

// claimAsking claims for who the sending of n's question by c, until
// askingFor, and wait more, have passed: made, or taken over once
// lapsed, or renewed when it is who's. False when another holds it.
func (m *Manager) claimAsking(c Channel, n Notice, who string, wait time.Duration) (bool, error) {
	key := askingKey(c, n)
	ctx := m.goroutines.Context()
	until := m.o.Now().Add(askingFor + wait)
	made, err := m.o.Notes.Create(ctx, key, []byte(who), until)
	if err != nil || made {
		return made, err
	}
	v, found, err := m.o.Notes.Get(ctx, key)
	if err != nil || !found || string(v) != who {
		return false, err
	}
	// Its own, renewed before it lapsed: no other takes it meanwhile.
	return true, m.o.Notes.Put(ctx, key, []byte(who), until)
}

// askAgain sends c the question n told again (its request taken over
// here, or its first send found owed), unless it was sent or is no
// longer pending (made false, err nil: its note that the send is owed
// forgotten), or another instance holds the claim on sending it
// (errMadeElsewhere: looked at again after owedWait).
func (m *Manager) askAgain(c Channel, n Notice) (Notice, bool, error) {
	sent := func() (bool, error) {
		done, err := true, error(nil)
		// Pending here, shown yet or not: the request taken over may be
		// told again before this instance's watch has heard its record.
		if _, _, waits := m.o.Hub.Waiting(n.Token, n.Request.ID); waits {
			done, err = m.noted(c, n)
		}
		if done {
			m.forgetAsking(c, n)
		}
		return done, err
	}
	if done, err := sent(); done || err != nil {
		return n, false, err
	}
	m.oweAsking(c, n) // the asker may have been killed before it noted it
	switch ok, err := m.claimAsking(c, n, m.id+" again", 0); {
	case err != nil:
		return n, false, err
	case !ok:
		return n, false, errMadeElsewhere
	}
	// Sent as the claim was taken, by its holder before it lapsed? Or
	// settled: the claim goes, so that its follow-up is not taken for
	// one of a question sent (current).
	if done, err := sent(); done || err != nil {
		if err == nil {
			m.releaseAsking(c, n)
		}
		return n, false, err
	}
	ctx, cancel := context.WithTimeout(m.goroutines.Context(), askTimeout)
	defer cancel()
	if err := c.Send(ctx, n); err != nil {
		return n, false, err
	}
	m.noteSent(c, n)
	m.log.Info("a question sent by the instance that took it over: the one that asked it had not sent it", "channel", c.Name(), "id", n.Request.ID)
	return n, true, nil
}

// forgetAsking forgets the note that c owes the first send of n's
// question: it was sent, or is no longer owed.
func (m *Manager) forgetAsking(c Channel, n Notice) {
	if err := deleteNote(m.goroutines.Context(), m.o.Notes, owedPrefix+askingKey(c, n)); err != nil {
		m.log.Debug("a question's first send noted owed still; its note lapses", "channel", c.Name(), "id", n.Request.ID, "err", err)
	}
}

// releaseAsking lets go of this instance's claim on c's sending of n's
// question, found sent or settled: a follow-up of its settle that saw
// it held would take it for a send that may have gone out (current),
// and, once it lapsed, make an outcome of a question never shown.
func (m *Manager) releaseAsking(c Channel, n Notice) {
	if err := deleteNote(m.goroutines.Context(), m.o.Notes, askingKey(c, n)); err != nil {
		m.log.Debug("a question's send claimed still; the claim lapses", "channel", c.Name(), "id", n.Request.ID, "err", err)
	}
}

// instanceID names this Manager in its claims.
func instanceID() string { return rand.Text() }
