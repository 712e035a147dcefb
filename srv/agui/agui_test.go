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
	if !busy.open() {
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
