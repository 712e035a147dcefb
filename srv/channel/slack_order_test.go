package channel

import (
	"fmt"
	"sync"
	"testing"
)

// TestSlackQueueBounds: events of different messages run side by side,
// never more than slackWorkers at once (the next waits for a free
// worker); those of one message run one at a time, in order; past
// maxSlackQueued waiting on one message, another is refused.
func TestSlackQueueBounds(t *testing.T) {
	q := newSlackQueue()
	defer q.wait()
	release := make(chan struct{})
	started := make(chan string, 2*slackWorkers)
	var mu sync.Mutex
	running, most := 0, 0
	block := func(name string) func() {
		return func() {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			started <- name
			<-release
			mu.Lock()
			running--
			mu.Unlock()
		}
	}
	for i := range slackWorkers {
		if !q.run(t.Context(), fmt.Sprint("m", i), block(fmt.Sprint("m", i))) {
			t.Fatalf("event %d refused", i)
		}
	}
	for range slackWorkers {
		within(t, "an event started", started)
	}
	// One message's events wait behind its first, up to the bound.
	var order []int
	for i := range maxSlackQueued {
		if !q.run(t.Context(), "m0", func() { order = append(order, i) }) {
			t.Fatalf("event %d of m0 refused", i)
		}
	}
	if q.run(t.Context(), "m0", func() { t.Error("an event past the bound ran") }) {
		t.Error("an event past the bound was taken")
	}
	// A new message's event waits for a worker: run returns once one is
	// free.
	freed := make(chan bool)
	go func() { freed <- q.run(t.Context(), "new", block("new")) }()
	close(release)
	if !within(t, "a worker for the new message", freed) {
		t.Fatal("the new message's event was refused")
	}
	q.wait()
	if most > slackWorkers {
		t.Errorf("%d events ran at once, more than %d", most, slackWorkers)
	}
	for i, v := range order {
		if i != v {
			t.Fatalf("one message's events ran in the order %v", order)
		}
	}
	if len(order) != maxSlackQueued {
		t.Errorf("%d of m0's %d waiting events ran", len(order), maxSlackQueued)
	}
}
