package hub

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestLateLooksKeepNoLongIDs: in a cluster an answer to an ID this
// instance does not show looks for it in the shared store, and an ID not
// found is not looked for again for a while. A /ws frame may be 16 MiB,
// all of it an ID: what the room keeps of the IDs not found is bounded
// in count, and must be in bytes too, not the IDs as sent (8 of 8 MiB
// kept 64 MiB until the room's next miss).
func TestLateLooksKeepNoLongIDs(t *testing.T) {
	h := New(Options{Shared: newBus(), Instance: "b"})
	defer h.Close()
	const n, size = lateBurst, 8 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		id := strings.Repeat("x", size-8) + strconv.Itoa(10000000+i)
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, textReply("x")); !errors.Is(err, ErrNotPending) {
			t.Fatalf("an answer to no request: %v", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > n*size/4 {
		t.Fatalf("%d answers to unknown %d-byte IDs left the heap %d bytes larger", n, size, grew)
	}
}
