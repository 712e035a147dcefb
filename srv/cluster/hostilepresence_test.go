package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestHostilePresence: a device written into the presence bucket by a
// NATS client of no instance, under an instance alive, with a nickname of
// half a megabyte over many lines, is shown with a nickname of one short line.
func TestHostilePresence(t *testing.T) {
	ns := natstest.Start(t)
	start(t, ns.URL(), "a")
	b := start(t, ns.URL(), "b")
	onB := newClient("b0b0")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	kv := foreignKV(t, ns.URL(), PresenceBucket)
	ctx := context.Background()
	v, err := json.Marshal(present{Nickname: strings.Repeat("evil\n", 100<<10)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, presenceKey(store.Room(tok), "a", "e0e0"), v); err != nil {
		t.Fatal(err)
	}
	for {
		m := onB.expectAny(t)
		if u := m.GetUserConnectionStatusNotification().GetUser(); u.GetClientId() == "e0e0" {
			if n := u.GetNickname(); len(n) > maxNickname+len("…") || strings.Contains(n, "\n") {
				t.Fatalf("B's device is shown a nickname of %d bytes, %d lines", len(n), strings.Count(n, "\n")+1)
			}
			return
		}
	}
}
