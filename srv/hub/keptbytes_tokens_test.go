package hub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestMissedBytesPerToken: one token's holder answering with images
// past its budget drops only that token's kept answers: another token's,
// kept meanwhile, all stay, in its room and in the records behind it.
func TestMissedBytesPerToken(t *testing.T) {
	const size = 1 << 20
	now := time.Unix(1000, 0)
	h := New(Options{Now: func() time.Time { return now }, MissedBytes: 4 * size})
	defer h.Close()
	keep := func(tok string, i int) {
		t.Helper()
		rep := imageReply(i, size)
		rec := store.Record{Room: h.room(tok).digest, ID: fmt.Sprint(tok, "-", i), Kind: int(wire.AskQuestion), ProjectDirectory: "/p",
			Text: "q?", Status: store.Answered, Reply: encodeReply(&rep), ClosedAt: now.Add(time.Duration(i) * time.Second), ClosedNote: ReasonUndelivered}
		if _, err := h.shared.Create(context.Background(), SharedRecord{Record: rec, Holder: h.self}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		keep("victim", i)
	}
	victimHeld, _ := missedHeld(h, h.room("victim"))
	recordsBefore := recordsHeld(h)
	for i := range 40 {
		keep("flooder", 100+i)
	}
	if held, ids := missedHeld(h, h.room("victim")); held != victimHeld || len(ids) != 3 {
		t.Fatalf("the other token keeps %d bytes (%v), had %d", held, ids, victimHeld)
	}
	if held, _ := missedHeld(h, h.room("flooder")); held > 4*size+size/8 {
		t.Errorf("the flooding token keeps %d bytes, budget %d", held, 4*size)
	}
	if got := recordsHeld(h); got < recordsBefore {
		t.Errorf("the records hold %d bytes, fewer than the other token's %d", got, recordsBefore)
	}
	if ms := h.TakeMissed("victim", "/p", nil, 0); len(ms) != 3 {
		t.Fatalf("the other token's agent got %d answers, want 3", len(ms))
	}
}
