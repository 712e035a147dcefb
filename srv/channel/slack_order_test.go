package channel

import (
	"fmt"
	"sync"
	"testing"
)

// TestSlackQueueBounds: events of different messages run side by side,
// never more than slackWorkers at once, and taking one never waits: the
// next waits for a free worker in the queue, not in run; those of one
// message run one at a time, in order; past maxSlackQueued waiting on
// one message, or maxSlackWaiting in all, another is refused, and
// every event taken runs.
func TestSlackQueueBounds(t *testing.T) {
	q := newSlackQueue()
	defer q.wait()
	release := make(chan struct{})
	started := make(chan string, 2*slackWorkers)
	var mu sync.Mutex
	running, most, ran := 0, 0, 0
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
			ran++
			mu.Unlock()
		}
	}
	for i := range slackWorkers {
		if !q.run(fmt.Sprint("m", i), block(fmt.Sprint("m", i))) {
			t.Fatalf("event %d refused", i)
		}
	}
	for range slackWorkers {
		within(t, "an event started", started)
	}
	// One message's events wait behind its first, up to the bound.
	var order []int
	for i := range maxSlackQueued {
		if !q.run("m0", func() { order = append(order, i) }) {
			t.Fatalf("event %d of m0 refused", i)
		}
	}
	if q.run("m0", func() { t.Error("an event past the bound ran") }) {
		t.Error("an event past the bound was taken")
	}
	// New messages' events are taken at once, every worker busy, up to
	// the bound of all waiting.
	waited := 0
	for i := maxSlackQueued; i < maxSlackWaiting; i++ {
		if !q.run(fmt.Sprint("new", i), func() {
			mu.Lock()
			waited++
			mu.Unlock()
		}) {
			t.Fatalf("event %d waiting refused", i)
		}
	}
	if q.run("one more", func() { t.Error("an event past the bound of all ran") }) {
		t.Error("an event past the bound of all was taken")
	}
	close(release)
	q.wait()
	if most > slackWorkers {
		t.Errorf("%d events ran at once, more than %d", most, slackWorkers)
	}
	for i, v := range order {
		if i != v {
			t.Fatalf("one message's events ran in the order %v", order)
		}
	}
	if len(order) != maxSlackQueued || waited != maxSlackWaiting-maxSlackQueued || ran != slackWorkers {
		t.Errorf("ran %d of m0's %d waiting events, %d of %d others waiting, %d of %d blocked",
			len(order), maxSlackQueued, waited, maxSlackWaiting-maxSlackQueued, ran, slackWorkers)
	}
	// Emptied, it takes events again.
	done := make(chan struct{})
	if !q.run("m0", func() { close(done) }) {
		t.Fatal("an event refused once the queue emptied")
	}
	within(t, "the event run", done)
}
