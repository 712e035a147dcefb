package push

import (
	"context"
	"slices"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestClosedAgainWhenSettledDuringItsPush: in a cluster a question is
// answered on another instance while this one pushes it: that instance
// pushes the close, which can reach the push service before this
// question's push, which then shows the question again, buttons and all,
// with no close after it. An ask push that went through for a question
// settled meanwhile is followed by its close from here.
func TestClosedAgainWhenSettledDuringItsPush(t *testing.T) {
	f := newFixture(t, Options{})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome")
	f.s.status = func(path string, n int) int {
		if n == 1 {
			// Answered elsewhere as it is pushed: this instance does
			// not hear the settle as its own event (emitted once in a
			// cluster, where it was written).
			f.p.unsub()
			if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
				t.Error(err)
			}
		}
		return 201
	}
	answered := f.ask(tokA, "q-1", "Deploy?")
	<-answered
	got := f.s.waitFor(t, "/phone", 2)
	if m := phone.open(t, f.s, got[0]).msg; m.Type != "ask" || m.ID != "q-1" {
		t.Fatalf("the device got %s of %s first, want q-1 asked", m.Type, m.ID)
	}
	if m := phone.open(t, f.s, got[1]).msg; m.Type != "settled" || m.ID != "q-1" || m.Outcome != "Answered on PC" {
		t.Fatalf("after the question's push the device got %s of %s (%q), want q-1's close", m.Type, m.ID, m.Outcome)
	}
}

// TestClosedOnceWhenSettledHereDuringItsPush: a question answered on
// this instance while it is pushed has its close queued here: it is not
// pushed a second time (a push that closes nothing counts against the
// browser's budget of silent pushes).
func TestClosedOnceWhenSettledHereDuringItsPush(t *testing.T) {
	f := newFixture(t, Options{})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome")
	f.s.status = func(path string, n int) int {
		if n == 1 {
			if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
				t.Error(err)
			}
		}
		return 201
	}
	<-f.ask(tokA, "q-1", "Deploy?")
	f.s.waitFor(t, "/phone", 2)
	f.ask(tokA, "q-2", "Ship?") // pushed after anything else of q-1
	got := f.s.waitFor(t, "/phone", 3)
	var seen []string
	for _, r := range got {
		m := phone.open(t, f.s, r).msg
		seen = append(seen, m.Type+" "+m.ID)
	}
	if want := []string{"ask q-1", "settled q-1", "ask q-2"}; !slices.Equal(seen, want) {
		t.Fatalf("the device got %q, want %q", seen, want)
	}
}

// TestClosedOnceWhenSettledHereAsItsPushReturns: a question answered on
// this instance as its push returns is settled in the hub a moment
// before its event reaches the Pusher (the room's clients are told
// first). The close the Pusher sends for it then, its push through, is
// the only one: the event's close is not pushed after it (a push that
// closes nothing counts against the browser's budget of silent pushes).
func TestClosedOnceWhenSettledHereAsItsPushReturns(t *testing.T) {
	f := newFixture(t, Options{})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome")
	// The settle's event reaches the Pusher once the device had a
	// second push.
	settled, second, heard := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f.p.unsub()
	t.Cleanup(f.hub.Subscribe(func(ev hub.Event) {
		if ev.Kind != hub.Asked {
			close(settled)
			<-second
			defer close(heard)
		}
		f.p.event(ev)
	}))
	f.s.status = func(path string, n int) int {
		switch n {
		case 1:
			go func() {
				if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
					t.Error(err)
				}
			}()
			<-settled
		case 2:
			close(second)
		}
		return 201
	}
	<-f.ask(tokA, "q-1", "Deploy?")
	<-heard
	f.ask(tokA, "q-2", "Ship?") // pushed after anything else of q-1
	got := f.s.waitFor(t, "/phone", 3)
	var seen []string
	for _, r := range got {
		m := phone.open(t, f.s, r).msg
		seen = append(seen, m.Type+" "+m.ID)
	}
	if want := []string{"ask q-1", "settled q-1", "ask q-2"}; !slices.Equal(seen, want) {
		t.Fatalf("the device got %q, want %q", seen, want)
	}
}
