package agui

import (
	"runtime"
	"strings"
	"testing"
)

// TestInputOfMillionsOfEmptyMessagesRefused: a RunAgentInput of 4 MB,
// under the body bound, whose messages are 1.39 million empty objects.
// Decoded, it would be some 800 MiB of structs before the count of its
// messages is checked; it is refused from its text, for about what the
// text costs to read.
func TestInputOfMillionsOfEmptyMessagesRefused(t *testing.T) {
	body := []byte(`{"threadId":"th","runId":"r","messages":[{}` + strings.Repeat(`,{}`, 1_390_000) + `]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parseInput(body)
	runtime.ReadMemStats(&after)
	allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
	t.Logf("a body of %d KiB: %d MiB allocated; %v", len(body)>>10, allocated, err)
	if err == nil || !strings.Contains(err.Error(), "values") {
		t.Errorf("err = %v", err)
	}
	if allocated > 32 {
		t.Errorf("%d MiB allocated for a body of %d KiB", allocated, len(body)>>10)
	}
}
