package agui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestThreadQueueBounded: a thread queues at most maxQueue envelopes and
// maxQueueBytes for its runs, refusing (Deliver false) what is past
// them; what a run takes makes room again, and the relay's own signals
// (a replacement) are queued whatever it holds.
func TestThreadQueueBounded(t *testing.T) {
	r := relay.New(relay.Options{})
	defer r.Close()
	h := New(Options{Relay: r})
	defer h.Close()
	th := threadOf(t, h, "tok", "q")
	msg := relay.Envelope{Type: wire.TypeAgentMessage, Payload: json.RawMessage(`{"text":"hi"}`)}
	for i := range maxQueue {
		if !th.Deliver(msg) {
			t.Fatalf("message %d refused", i)
		}
	}
	if th.Deliver(msg) {
		t.Fatal("a message past maxQueue was queued")
	}
	if env, ok := th.next(context.Background(), nil, nil, nil); !ok || env.Type != wire.TypeAgentMessage {
		t.Fatalf("next = %v %v", env, ok)
	}
	if !th.Deliver(msg) {
		t.Fatal("no room after a run took one")
	}
	if !th.Deliver(relay.Envelope{Type: wire.TypeReplaced}) {
		t.Fatal("the relay's own signal was refused")
	}

	th2 := threadOf(t, h, "tok", "bytes")
	big := relay.Envelope{Type: wire.TypeAgentMessage, Payload: json.RawMessage(`{"text":"` + strings.Repeat("x", 4<<20) + `"}`)}
	n := 0
	for th2.Deliver(big) {
		n++
		if n > maxQueue {
			t.Fatal("no bound in bytes")
		}
	}
	th2.mu.Lock()
	queued := th2.queued
	th2.mu.Unlock()
	if want := maxQueueBytes / queuedSize(big); n != want || queued > maxQueueBytes {
		t.Fatalf("%d messages of 4 MiB queued (%d bytes), bound %d bytes", n, queued, maxQueueBytes)
	}
}
