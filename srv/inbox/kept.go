package inbox

import (
	"sync"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// What /ws remembers of the older web UI (upstream's), which never asks
// for the pending list: such a page is pushed the pending requests at
// login (hub.CatchUp), and when its connection drops without closing
// (the network dropped, the server shut down) it comes back under the
// same nickname with the cards it had and adds every request frame as a
// new card. So the cards it had are remembered by nickname (hub.Shown),
// its next login is not pushed them again, and is told how those that
// settled meanwhile settled.

// maxKept bounds the nicknames a room remembers.
const maxKept = 64

// kept is the cards remembered, by token and nickname.
type kept struct {
	mu    sync.Mutex // held alone
	rooms map[string]map[string][]hub.Card
}

// keep remembers cards as what the page of nickname shows.
func (k *kept) keep(token, nickname string, cards []hub.Card) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rooms == nil {
		k.rooms = make(map[string]map[string][]hub.Card)
	}
	room := k.rooms[token]
	if room == nil {
		room = make(map[string][]hub.Card)
		k.rooms[token] = room
	}
	if _, ok := room[nickname]; !ok && len(room) >= maxKept {
		for n := range room { // forget one: that page may show a card twice
			delete(room, n)
			break
		}
	}
	room[nickname] = cards
}

// take returns, and forgets, what the page of nickname shows.
func (k *kept) take(token, nickname string) []hub.Card {
	k.mu.Lock()
	defer k.mu.Unlock()
	cards := k.rooms[token][nickname]
	delete(k.rooms[token], nickname)
	if len(k.rooms[token]) == 0 {
		delete(k.rooms, token)
	}
	return cards
}

// Kept returns the IDs of what the pages of the older web UI show, by room
// (the store's digest of its token) and nickname, for the next start of
// the server (SetKept): a server that restarts is such a page's
// connection dropping. Call it once every connection has ended (Close).
func (h *Handler) Kept() map[string]map[string][]string {
	k := &h.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]map[string][]string)
	for token, room := range k.rooms {
		byNick := make(map[string][]string, len(room))
		for nick, cards := range room {
			for _, c := range cards {
				byNick[nick] = append(byNick[nick], c.ID)
			}
		}
		if len(byNick) > 0 {
			out[store.Room(token)] = byNick
		}
	}
	return out
}

// SetKept restores, for the rooms of tokens, what Kept returned before a
// restart (at most maxKept nicknames a room).
func (h *Handler) SetKept(tokens []string, saved map[string]map[string][]string) {
	for _, t := range tokens {
		n := 0
		for nick, ids := range saved[store.Room(t)] {
			if n == maxKept {
				break
			}
			h.kept.keep(t, nick, h.o.Hub.Cards(t, ids))
			n++
		}
	}
}
