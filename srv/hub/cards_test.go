package hub

import (
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestKeptToldOutcomesAfterRestart: a device's cards restored after a
// restart (Cards) whose requests settled before it, or whose outcome is
// forgotten, are told at its next login, within the push's bound.
func TestKeptToldOutcomesAfterRestart(t *testing.T) {
	h := New(Options{})
	defer h.Close()
	r := h.room("tok")
	r.mu.Lock()
	h.keepSettledLocked(r, "timed", &settled{kind: wire.TaskFinish, err: ErrTimeout, reason: "timeout", at: h.now()}, h.now().Add(-time.Hour))
	r.mu.Unlock()
	c := newFake("web")
	upTo := h.Join("tok", c, nil, Resume{})
	if pushed, left := h.CatchUp("tok", c, upTo, h.Cards("tok", []string{"timed", "lost"}), 1, one); len(pushed) != 0 || left != 1 {
		t.Errorf("bound 1: pushed %v, %d left; want none pushed, 1 left", pushed, left)
	}
	got := closedOf(c)
	// Restored cards go in ID order: "timed" is past the bound. Of "lost"
	// nothing is known any more, not even its kind.
	if want := []string{"lost " + ReasonNoLongerPending + " "}; !slices.Equal(got, want) {
		t.Errorf("told %q, want %q", got, want)
	}

	d := newFake("web")
	upTo = h.Join("tok", d, nil, Resume{})
	h.CatchUp("tok", d, upTo, h.Cards("tok", []string{"timed"}), 0, one)
	got = closedOf(d)
	if want := []string{"timed timeout TaskFinish"}; !slices.Equal(got, want) {
		t.Errorf("told %q, want %q", got, want)
	}
}

// notes is what f was sent.
func (f *fakeClient) notes() []*Note {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Note(nil), f.got...)
}

// closedOf lists the closings f was told, as "id reason kind" (kind ""
// when not known).
func closedOf(f *fakeClient) []string {
	var got []string
	for _, n := range f.notes() {
		if n.Kind == NoteClosed {
			kind := ""
			if n.Request.Kind != 0 {
				kind = n.Request.Kind.String()
			}
			got = append(got, n.Request.ID+" "+n.Reason+" "+kind)
		}
	}
	return got
}

// one counts each note as one frame.
func one(*Note) int { return 1 }
