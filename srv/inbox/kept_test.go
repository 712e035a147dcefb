package inbox

import (
	"fmt"
	"testing"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestKeptIsBounded: what /ws remembers of the older web UI's pages
// holds at most maxKept nicknames a room, however many pages come and go
// or a restart restores, and what it saves names the room by its digest,
// not its token.
func TestKeptIsBounded(t *testing.T) {
	hb := hub.New(hub.Options{})
	defer hb.Close()
	h := New(Options{Hub: hb})
	for i := range 3 * maxKept {
		h.kept.keep("tok", fmt.Sprint(i), hb.Cards("tok", []string{"q"}))
	}
	if n := len(h.kept.rooms["tok"]); n > maxKept {
		t.Fatalf("%d nicknames remembered, want at most %d", n, maxKept)
	}
	saved := h.Kept()
	if _, ok := saved["tok"]; ok || len(saved[store.Room("tok")]) != maxKept {
		t.Fatalf("saved %d rooms, %d nicknames under the room's digest", len(saved), len(saved[store.Room("tok")]))
	}
	for i := range 3 * maxKept {
		saved[store.Room("tok")][fmt.Sprint("n", i)] = []string{"q"}
	}
	h2 := New(Options{Hub: hb})
	h2.SetKept([]string{"tok"}, saved)
	if n := len(h2.kept.rooms["tok"]); n != maxKept {
		t.Fatalf("%d nicknames restored, want %d", n, maxKept)
	}
}
