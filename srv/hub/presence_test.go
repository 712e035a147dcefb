package hub

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

func TestPresenceAndChat(t *testing.T) {
	h := New(Options{})
	a, b, x := newFake("a"), newFake("b"), newFake("x")
	h.Join("tok", a, nil, Resume{})
	h.Join("tok", b, nil, Resume{})
	h.Join("other", x, nil, Resume{})
	st := a.waitFor(t, wire.CmdUserConnectionStatusNotification)
	if u := st.GetUserConnectionStatusNotification(); u.GetUser().GetClientId() != "b" || u.GetStatus() != "connected" {
		t.Errorf("status = %v", u)
	}
	if us := h.OnlineUsers("tok"); len(us) != 2 || us[0].GetClientId() != "a" || us[1].GetClientId() != "b" {
		t.Errorf("online users = %v", us)
	}
	if _, err := h.Chat("tok", a, "b", "hello"); err != nil {
		t.Fatal(err)
	}
	m := b.waitFor(t, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
	if m.GetContent() != "hello" || m.GetSenderClientId() != "a" || m.GetReceiverNickname() != "nick-b" {
		t.Errorf("chat = %v", m)
	}
	if _, err := h.Chat("tok", a, "x", "across"); !errors.Is(err, ErrNoReceiver) {
		t.Errorf("chat to another token's client: %v", err)
	}
	if got := x.cmds(); len(got) != 0 {
		t.Errorf("other token got %v", got)
	}
	h.Leave("tok", b)
	deadline := time.Now().Add(2 * time.Second)
	for {
		a.mu.Lock()
		off := false
		for _, m := range a.got {
			if u := m.GetUserConnectionStatusNotification(); u.GetStatus() == "disconnected" && u.GetUser().GetClientId() == "b" {
				off = true
			}
		}
		a.mu.Unlock()
		if off {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no offline notification")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPresenceCoalesced: a crowd joining a small room at once costs each
// client one online-users list, not a frame per arrival.
func TestPresenceCoalesced(t *testing.T) {
	h := New(Options{PresenceDelay: 30 * time.Millisecond})
	watcher := newFake("watcher")
	h.Join("tok", watcher, nil, Resume{})
	time.Sleep(60 * time.Millisecond)
	for i := range 40 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
	}
	m := watcher.waitFor(t, wire.CmdGetOnlineUsers)
	if n := m.GetGetOnlineUsersResponse().GetTotalCount(); n != 41 {
		t.Errorf("list of %d", n)
	}
	time.Sleep(60 * time.Millisecond)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if len(watcher.got) > 3 {
		t.Errorf("the watcher got %d frames for 40 arrivals", len(watcher.got))
	}
}

// TestBigRoomPresence: past bigRoom clients, a crowd costs each client one
// small "changed" notice, not the list.
func TestBigRoomPresence(t *testing.T) {
	h := New(Options{PresenceDelay: 10 * time.Millisecond})
	watcher := newFake("watcher")
	h.Join("tok", watcher, nil, Resume{})
	for i := range bigRoom + 10 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	before := len(watcher.got)
	watcher.mu.Unlock()
	for i := range 200 {
		h.Join("tok", newFake(fmt.Sprint("d", i)), nil, Resume{})
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	got := watcher.got[before:]
	if len(got) != 1 || got[0].GetUserConnectionStatusNotification().GetStatus() != wire.StatusChanged {
		t.Fatalf("200 arrivals in a big room gave the watcher %d frames: %v", len(got), got)
	}
}
