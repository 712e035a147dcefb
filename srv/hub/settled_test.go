package hub

import (
	"fmt"
	"testing"
	"time"
)

// TestSettledBounded: outcomes kept for re-attaching are dropped oldest
// first, by age and past the cap, without rescanning the rest.
func TestSettledBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	h := New(Options{Now: func() time.Time { return now }, Retention: time.Minute})
	r := h.room("tok")
	for i := range maxSettled + 10 {
		h.keepSettledLocked(r, fmt.Sprint("s", i), &settled{at: now}, now.Add(-time.Minute))
	}
	if len(r.settled) != maxSettled || r.settled["s0"] != nil || r.settled[fmt.Sprint("s", maxSettled+9)] == nil {
		t.Fatalf("kept %d; s0 %v", len(r.settled), r.settled["s0"] != nil)
	}
	now = now.Add(2 * time.Minute)
	h.keepSettledLocked(r, "fresh", &settled{at: now}, now.Add(-time.Minute))
	if len(r.settled) != 1 || r.settled["fresh"] == nil || len(r.settledOrder) != 1 {
		t.Fatalf("after they aged: %d kept, order %d", len(r.settled), len(r.settledOrder))
	}
}
