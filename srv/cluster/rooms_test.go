package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// online lists the client IDs of in's online list.
func online(in *instance) []string {
	var ids []string
	for _, u := range in.hub.OnlineUsers(tok) {
		ids = append(ids, u.GetClientId())
	}
	slices.Sort(ids)
	return ids
}

// eventually waits until cond holds, failing after a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// presenceOf waits for c's next presence notification about who.
func presenceOf(t *testing.T, c *client, who string) string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-c.frames:
			n := m.GetUserConnectionStatusNotification()
			if m.Cmd == wire.CmdUserConnectionStatusNotification && n.GetUser().GetClientId() == who {
				return n.GetStatus()
			}
		case <-deadline:
			t.Fatalf("%s: no presence notification about %s", c.id, who)
			return ""
		}
	}
}

// TestPresenceAcrossInstances: a device on A is in B's online list and
// B's devices are told when it comes and goes; and the other way round.
func TestPresenceAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onB := newClient("b0b0")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	onA := newClient("a0a0")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	if s := presenceOf(t, onB, "a0a0"); s != wire.StatusConnected {
		t.Fatalf("B's device was told %q of A's", s)
	}
	eventually(t, "both devices in both lists", func() bool {
		return slices.Equal(online(a), []string{"a0a0", "b0b0"}) && slices.Equal(online(b), []string{"a0a0", "b0b0"})
	})
	a.hub.Leave(tok, onA)
	if s := presenceOf(t, onB, "a0a0"); s != wire.StatusDisconnected {
		t.Fatalf("B's device was told %q of A's leaving", s)
	}
	if got := online(b); !slices.Equal(got, []string{"b0b0"}) {
		t.Fatalf("B's list after A's device left: %v", got)
	}
}

// TestChatAcrossInstances: a chat line and a remote-input backspace from
// a device on A reach a device on B; a line to a device that left is
// refused.
func TestChatAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("a1a1"), newClient("b1b1")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	eventually(t, "B's device in A's list", func() bool { return slices.Contains(online(a), "b1b1") })
	msg, err := a.hub.Chat(tok, onA, "b1b1", "hello from A")
	if err != nil {
		t.Fatal(err)
	}
	got := onB.expect(t, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
	if got.GetContent() != "hello from A" || got.GetSenderClientId() != "a1a1" || got.GetMessageId() != msg.GetMessageId() ||
		got.GetReceiverNickname() != "nick-b1b1" {
		t.Fatalf("B's device got %v", got)
	}
	if err := a.hub.Backspace(tok, onA, "b1b1"); err != nil {
		t.Fatal(err)
	}
	if m := onB.expect(t, wire.CmdSendBackspace); m.GetStrParam() != "a1a1" {
		t.Fatalf("backspace = %v", m)
	}
	// B's device leaves; until A hears of it, the line reaches B, which
	// has no such client: refused either way.
	b.hub.Leave(tok, onB)
	if _, err := a.hub.Chat(tok, onA, "b1b1", "still there?"); !errors.Is(err, hub.ErrNoReceiver) {
		t.Fatalf("chat to a device gone: %v", err)
	}
}

// TestPresenceInstanceDies: an instance that stops without a word (its
// goroutines and connection gone, nothing deleted) has its devices drop
// out of the others' lists once its heartbeat expires, with a
// disconnected notice.
func TestPresenceInstanceDies(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("a2a2"), newClient("b2b2")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	if s := presenceOf(t, onB, "a2a2"); s != wire.StatusConnected {
		t.Fatalf("status %q", s)
	}
	a.c.die()
	if s := presenceOf(t, onB, "a2a2"); s != wire.StatusDisconnected {
		t.Fatalf("status %q", s)
	}
	if got := online(b); !slices.Equal(got, []string{"b2b2"}) {
		t.Fatalf("B's list after A died: %v", got)
	}
	if _, err := b.hub.Chat(tok, onB, "a2a2", "hello?"); !errors.Is(err, hub.ErrNoReceiver) {
		t.Fatalf("chat to a dead instance's device: %v", err)
	}
}

// die stops c as a kill -9 would: no goodbye to NATS.
func (c *Cluster) die() {
	c.closing.Do(func() {
		c.stop()
		c.wg.Wait()
		c.nc.Close()
	})
}
