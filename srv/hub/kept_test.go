package hub

import (
	"fmt"
	"testing"
)

// TestKeptIsBounded: what a room remembers of upstream web pages
// (Kept, SetKept) holds at most maxKept nicknames, however many clients
// come and go.
func TestKeptIsBounded(t *testing.T) {
	h := New(Options{})
	defer h.Close()
	for i := range 3 * maxKept {
		h.Kept("tok", newFake(fmt.Sprint(i)), 0, nil)
	}
	if n := len(h.room("tok").kept); n > maxKept {
		t.Fatalf("%d nicknames remembered, want at most %d", n, maxKept)
	}
	saved := map[string]map[string][]string{h.room("tok").digest: {}}
	for i := range 3 * maxKept {
		saved[h.room("tok").digest][fmt.Sprint("n", i)] = []string{"q"}
	}
	h2 := New(Options{})
	defer h2.Close()
	h2.SetKept([]string{"tok"}, saved)
	if n := len(h2.room("tok").kept); n > maxKept {
		t.Fatalf("%d nicknames restored, want at most %d", n, maxKept)
	}
}
