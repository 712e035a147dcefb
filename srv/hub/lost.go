package hub

import (
	"fmt"
	"slices"

	"github.com/agentassistant/agentassistant/srv/store"
)

// The requests that were pending when the store was found damaged and
// could not be restored (store.Lost): their agents wait in vain, and the
// person is told at every login which projects' questions went, until a
// device dismisses the notice.

// maxLostShown bounds the lost requests in one note: the newest go.
const maxLostShown = 200

// restoreLost gives each room of byRoom the lost requests of the store
// that are its.
func (h *Hub) restoreLost(byRoom map[string]string) int {
	n := 0
	for _, l := range h.local.db.Lost() {
		token, ok := byRoom[l.Room]
		if !ok {
			continue
		}
		r := h.room(token)
		r.mu.Lock()
		r.lost = append(r.lost, l)
		r.mu.Unlock()
		n++
	}
	return n
}

// Lost returns the note a device of token is sent as it logs in, or nil
// when the room lost nothing (or it was dismissed).
func (h *Hub) Lost(token string) *Note {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lost) == 0 {
		return nil
	}
	return lostNoteLocked(r)
}

func lostNoteLocked(r *room) *Note {
	return &Note{Kind: NoteLost, Lost: slices.Clone(r.lost[max(0, len(r.lost)-maxLostShown):])}
}

// DismissLost forgets the lost requests of token with the given IDs: a
// device showed them and the person dismissed the notice. The room's
// devices are sent what is left (nothing, usually), so that the notice
// goes from every screen.
func (h *Hub) DismissLost(token string, ids []string) error {
	r := h.room(token)
	r.mu.Lock()
	n := len(r.lost)
	r.lost = slices.DeleteFunc(r.lost, func(l store.Lost) bool { return slices.Contains(ids, l.ID) })
	if len(r.lost) == n {
		r.mu.Unlock()
		return nil
	}
	note := lostNoteLocked(r)
	for _, c := range r.clientsLocked() {
		c.Send(note) // queues; a client too slow is shut down, not waited for
	}
	r.mu.Unlock()
	if h.local == nil || h.local.db == nil {
		return nil
	}
	if err := h.local.db.Dismiss(r.digest, ids); err != nil {
		return fmt.Errorf("dismiss lost requests: %w", err)
	}
	return nil
}
