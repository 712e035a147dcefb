package agui

import (
	"testing"

	"github.com/agentassistant/agentassistant/srv/relay"
)

// threadOf is h.thread for a run without messages; it fails the test
// if the run is refused.
func threadOf(t *testing.T, h *Handler, token, id string) *thread {
	t.Helper()
	th, err := h.thread(token, &RunAgentInput{ThreadID: id, RunID: "r"})
	if err != nil {
		t.Fatalf("thread %s of %s refused: %v", id, token, err)
	}
	return th
}

// TestThreadsAreBounded: past MaxThreadsPerToken the token's least
// recently used idle thread leaves its relay session (its host is
// gone); one with an open run stays, and so does another token's.
func TestThreadsAreBounded(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r, MaxThreadsPerToken: 3})
	defer h.Close()
	busy := threadOf(t, h, "tok", "busy")
	if _, ok := busy.open(); !ok {
		t.Fatal("open")
	}
	threadOf(t, h, "other", "o")
	threadOf(t, h, "tok", "a")
	threadOf(t, h, "tok", "b")
	threadOf(t, h, "tok", "a") // b is now the least recently used idle one: it goes first
	for _, id := range []string{"c", "d", "e"} {
		threadOf(t, h, "tok", id)
	}
	h.mu.Lock()
	n := h.threads["tok"].Len()
	_, hasBusy := h.threads["tok"].Get("busy")
	h.mu.Unlock()
	if n != 3 || !hasBusy {
		t.Fatalf("threads = %d, busy kept %v", n, hasBusy)
	}
	for id, want := range map[string]bool{"busy": true, "a": false, "b": false, "c": false, "d": true, "e": true} {
		if online, _, _ := r.Status("tok", id); online != want {
			t.Errorf("thread %s: host online %v, want %v", id, online, want)
		}
	}
	if online, _, _ := r.Status("other", "o"); !online {
		t.Error("another token's thread was let go")
	}
}

// TestBusyThreadsAreKept: when each of a token's threads has a run open
// or a tool call waiting for its frontend, a new thread is refused with
// RUN_ERROR too_many_threads and none of them is let go; a run for a
// thread that exists is still served.
func TestBusyThreadsAreKept(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r, MaxThreadsPerToken: 2})
	defer h.Close()
	running := threadOf(t, h, "tok", "running")
	if _, ok := running.open(); !ok {
		t.Fatal("open")
	}
	waiting := threadOf(t, h, "tok", "waiting")
	waiting.mu.Lock()
	waiting.calls["call-1"] = "change_background" // phase one sent, no result yet
	waiting.mu.Unlock()
	for range 3 {
		if _, err := h.thread("tok", &RunAgentInput{ThreadID: "new", RunID: "r"}); err == nil || err.code != "too_many_threads" {
			t.Fatalf("a new thread past the bound: %v", err)
		}
	}
	h.mu.Lock()
	n := h.threads["tok"].Len()
	h.mu.Unlock()
	if n != 2 {
		t.Fatalf("threads = %d, want 2", n)
	}
	for _, id := range []string{"running", "waiting"} {
		if online, _, _ := r.Status("tok", id); !online {
			t.Errorf("thread %s was let go", id)
		}
		if online, _, _ := r.Status("tok", "new"); online {
			t.Error("the refused thread joined its relay session")
		}
	}
	if th := threadOf(t, h, "tok", "waiting"); th != waiting {
		t.Error("an existing thread's run got another thread")
	}
	threadOf(t, h, "other", "new") // another token has room of its own
}

// TestRefusedRunMakesNoThread: a new thread's run that brings tool
// results is refused, and joins nothing.
func TestRefusedRunMakesNoThread(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r})
	defer h.Close()
	in := &RunAgentInput{ThreadID: "flood", RunID: "r", Messages: []Message{{Role: "tool", ToolCallID: "nope"}}}
	if _, err := h.thread("tok", in); err == nil || err.code != codeInvalidResult {
		t.Fatalf("refusal = %v", err)
	}
	if len(h.threads) != 0 || r.Sessions() != 0 {
		t.Fatalf("threads %d, relay sessions %d", len(h.threads), r.Sessions())
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
	th := threadOf(t, h, "tok", "t")
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
