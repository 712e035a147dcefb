package hub

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// frames is how many notes c has got.
func (f *fakeClient) frames() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// statusOf is the status of the last presence notice c got about id, ""
// when none came.
func (f *fakeClient) statusOf(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := ""
	for _, m := range f.got {
		if m.Kind == NotePresence && m.User.ID == id {
			st = m.Status
		}
	}
	return st
}

// TestPresenceAndChat: joins and leaves reach the others PresenceDelay
// later, not before; chat goes to one client of the same token.
func TestPresenceAndChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 50 * time.Millisecond
		h := New(Options{PresenceDelay: delay})
		a, b, x := newFake("a"), newFake("b"), newFake("x")
		h.Join("tok", a, nil, Resume{})
		h.Join("tok", b, nil, Resume{})
		h.Join("other", x, nil, Resume{})
		time.Sleep(delay - time.Nanosecond)
		synctest.Wait()
		if n := a.frames(); n != 0 {
			t.Fatalf("a was told of b's arrival before the presence delay: %d frames", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := a.statusOf("b"); st != wire.StatusConnected {
			t.Errorf("a was told b is %q", st)
		}
		if us := h.OnlineUsers("tok"); len(us) != 2 || us[0].ID != "a" || us[1].ID != "b" {
			t.Errorf("online users = %v", us)
		}
		if _, err := h.Chat("tok", a, "b", "hello"); err != nil {
			t.Fatal(err)
		}
		m := b.waitFor(t, NoteLine).Line
		if m.Content != "hello" || m.From.ID != "a" || m.To.Nickname != "nick-b" || m.Backspace {
			t.Errorf("chat = %v", m)
		}
		if _, err := h.Chat("tok", a, "x", "across"); !errors.Is(err, ErrNoReceiver) {
			t.Errorf("chat to another token's client: %v", err)
		}
		if got := x.cmds(); len(got) != 0 {
			t.Errorf("other token got %v", got)
		}
		h.Leave("tok", b)
		time.Sleep(delay)
		synctest.Wait()
		if st := a.statusOf("b"); st != wire.StatusDisconnected {
			t.Fatalf("after b left, a was told b is %q", st)
		}
	})
}

// TestPresenceCoalesced: a crowd joining a small room at once costs each
// client one online-users list, not a frame per arrival.
func TestPresenceCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{PresenceDelay: 30 * time.Millisecond})
		watcher := newFake("watcher")
		h.Join("tok", watcher, nil, Resume{})
		time.Sleep(time.Minute)
		synctest.Wait()
		for i := range 40 {
			h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		watcher.mu.Lock()
		defer watcher.mu.Unlock()
		if len(watcher.got) != 1 || watcher.got[0].Kind != NoteOnline || len(watcher.got[0].Users) != 41 {
			t.Fatalf("40 arrivals gave the watcher %d frames, want one list of 41: %v", len(watcher.got), watcher.got)
		}
	})
}

// TestBigRoomPresence: past bigRoom clients, a crowd costs each client one
// small "changed" notice, not the list, and no sooner than bigRoomDelay.
func TestBigRoomPresence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{PresenceDelay: 10 * time.Millisecond})
		watcher := newFake("watcher")
		h.Join("tok", watcher, nil, Resume{})
		for i := range bigRoom + 10 {
			h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		before := watcher.frames()
		for i := range 200 {
			h.Join("tok", newFake(fmt.Sprint("d", i)), nil, Resume{})
		}
		time.Sleep(bigRoomDelay - time.Nanosecond)
		synctest.Wait()
		if n := watcher.frames(); n != before {
			t.Fatalf("a big room was told of arrivals %d frames sooner than bigRoomDelay", n-before)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		watcher.mu.Lock()
		defer watcher.mu.Unlock()
		got := watcher.got[before:]
		if len(got) != 1 || got[0].Kind != NoteCrowd {
			t.Fatalf("200 arrivals in a big room gave the watcher %d frames: %v", len(got), got)
		}
	})
}
