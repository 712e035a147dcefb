package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestOpenOnNATSShortOfStorage: NATS's JetStream has less file storage
// (max_file_store, or a nearly full disk under it) than a bucket
// reserves. The instance does not start, and says what is short and
// which setting gives it, rather than JetStream's bare error code.
func TestOpenOnNATSShortOfStorage(t *testing.T) {
	ns := natstest.StartStore(t, 8<<20)
	c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a"})
	if err == nil {
		c.Close()
		t.Fatal("opened on a NATS with 8 MiB of storage")
	}
	for _, want := range []string{MCPNotesBucket, "64 MiB", "max_file_store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// TestSecondInstanceOnNATSWithRoomForOne: NATS's storage holds the
// buckets' reservations once, not twice. The second instance opens the
// buckets the first made, rather than being refused as if it reserved
// them again.
func TestSecondInstanceOnNATSWithRoomForOne(t *testing.T) {
	ns := natstest.StartStore(t, 100<<20)
	for _, name := range []string{"a", "b"} {
		c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: name})
		if err != nil {
			t.Fatalf("instance %s: %v", name, err)
		}
		defer c.Close()
	}
}
