package channel

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// A question sent once in a cluster. The instance that asked a question
// sends it; killed before its send went out (the service busy, its
// retry waiting), it sends nothing, and the instance the agent
// re-attaches through, taking the request over, is told it again
// (hub.Event.Again). Each sender of a following channel claims the
// sending in the cluster's notes first (askingPrefix), for one try and
// the wait before the next (askingFor), and claims it again at each
// try; the claim of one killed lapses. Told again, an instance sends
// the question unless it was sent (its note among the follow-ups owed,
// noteSent), is no longer pending, or another holds the claim: then it
// looks again after owedWait (runOwed), until one of those, or the
// claim lapsed and is its own. The asker alive and slow holds its claim
// and sends; the instance told again then finds it sent.

const (
	// askingPrefix begins the keys of the claims on sending a question.
	askingPrefix = "asking."
	// askingFor is a claim's time past the try it is made for, and the
	// bound of that try (askTimeout).
	askingFor  = makingFor
	askTimeout = followTimeout
)

// asking reports whether n is a question c sends in a cluster under a
// claim: c follows its questions up, so their sending is noted.
func (m *Manager) asking(c Channel, n Notice) bool {
	_, follows := c.(following)
	return m.shared && follows && n.Kind == hub.Asked
}

// claimAsking claims for who the sending of n's question by c, until
// askingFor, and wait more, have passed: made, or taken over once
// lapsed, or renewed when it is who's. False when another holds it.
func (m *Manager) claimAsking(c Channel, n Notice, who string, wait time.Duration) (bool, error) {
	key := askingPrefix + sentNoteKey(store.Room(n.Token), n.Request.ID, n.slot, c.Name())
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
// here), unless it was sent or is no longer pending (made false, err
// nil), or another instance holds the claim on sending it
// (errMadeElsewhere: looked at again after owedWait).
func (m *Manager) askAgain(c Channel, n Notice) (Notice, bool, error) {
	sent := func() (bool, error) {
		// Pending here, shown yet or not: the request taken over may be
		// told again before this instance's watch has heard its record.
		if !m.o.Hub.Waits(n.Token, n.Request.ID) {
			return true, nil
		}
		_, found, err := m.o.Notes.Get(m.goroutines.Context(), m.owedKey(c, n))
		return found, err
	}
	if done, err := sent(); done || err != nil {
		return n, false, err
	}
	switch ok, err := m.claimAsking(c, n, m.id+" again", 0); {
	case err != nil:
		return n, false, err
	case !ok:
		return n, false, errMadeElsewhere
	}
	// Sent as the claim was taken, by its holder before it lapsed?
	if done, err := sent(); done || err != nil {
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

// instanceID names this Manager in its claims.
func instanceID() string { return rand.Text() }
