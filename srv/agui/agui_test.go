package agui

import (
	"testing"

	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestThreadsAreBounded: past MaxThreads the least recently used thread
// leaves its relay session (its host is gone); one with an open run
// stays.
func TestThreadsAreBounded(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r, MaxThreads: 3})
	defer h.Close()
	busy := h.thread("tok", "busy")
	if _, ok := busy.open(); !ok {
		t.Fatal("open")
	}
	h.thread("tok", "a")
	h.thread("tok", "b")
	h.thread("tok", "a") // b is now the least recently used idle one: it goes first
	for _, id := range []string{"c", "d", "e"} {
		h.thread("tok", id)
	}
	h.mu.Lock()
	n := len(h.threads)
	_, hasBusy := h.threads["tok\x00busy"]
	h.mu.Unlock()
	if n != 3 || !hasBusy {
		t.Fatalf("threads = %d, busy kept %v", n, hasBusy)
	}
	for id, want := range map[string]bool{"busy": true, "a": false, "b": false, "c": false, "d": true, "e": true} {
		if online, _, _ := r.Status("tok", id); online != want {
			t.Errorf("thread %s: host online %v, want %v", id, online, want)
		}
	}
}

// TestStaleCloseKeepsNextRun: a run's end lets the next run open at once;
// the ended run's own deferred close, coming after, must not close the
// next one (else a third run could open beside it).
func TestStaleCloseKeepsNextRun(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r})
	defer h.Close()
	th := h.thread("tok", "t")
	one, _ := th.open()
	th.close(one, false) // RUN_FINISHED sent
	if _, ok := th.open(); !ok {
		t.Fatal("the next run could not open")
	}
	th.close(one, false) // the first run's handler returns
	if _, ok := th.open(); ok {
		t.Fatal("a third run opened beside the second")
	}
}
