package hub

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// slowClient is a device whose socket takes a question only when the test
// lets it: the question's broadcast is still going out while a quick device
// answers.
type slowClient struct {
	*fakeClient
	gate chan struct{}
}

func (s *slowClient) Send(n *Note) bool {
	if n.Kind == NoteAsked {
		<-s.gate
	}
	return s.fakeClient.Send(n)
}

// A room's request events reach each device in order, one broadcast after
// another: the notification of a quick answer waits until the question has
// gone out to everyone, so it neither overtakes the question on a slow
// device nor competes with its fan-out.
func TestRequestEventsGoOutInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		quick := newFake("quick")
		slow := &slowClient{fakeClient: newFake("slow"), gate: make(chan struct{})}
		h.Join("tok", quick, nil, Resume{})
		h.Join("tok", slow, nil, Resume{})
		rc, _ := ask(h, "tok", "r1", time.Minute, context.Background())
		synctest.Wait() // the question is out to quick, and held at slow
		answered := make(chan error, 1)
		go func() {
			answered <- h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", Reply{ClientID: "quick"})
		}()
		synctest.Wait()
		early := slow.cmds()
		close(slow.gate)
		if len(early) != 0 {
			t.Errorf("before the question reached it, the slow device got %v", early)
		}
		synctest.Wait()
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		<-rc
		time.Sleep(settledNoteDelay)
		synctest.Wait()
		want := []NoteKind{NoteAsked, NoteAnswered}
		if got := slow.cmds(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("the slow device got %v, want %v", got, want)
		}
	})
}

// The note that a request was answered waits settledNoteDelay, so that it
// does not compete with the question still going into a crowd's devices,
// nor hold up the agent's answer behind a write to every device; the
// room's next event takes it along at once, in order; the device that
// answered is not told, and a room with nobody else to tell sends nothing
// later.
func TestSettledNoteWaitsItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		a, b := newFake("a"), newFake("b")
		h.Join("tok", a, nil, Resume{})
		h.Join("tok", b, nil, Resume{})
		rc, _ := ask(h, "tok", "r1", time.Minute, context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", Reply{ClientID: "a"}); err != nil {
			t.Fatal(err)
		}
		<-rc // the agent has its answer before any device is told
		synctest.Wait()
		if got := b.cmds(); len(got) != 1 {
			t.Fatalf("at once, b got %v; want only the question", got)
		}
		time.Sleep(settledNoteDelay - time.Nanosecond)
		synctest.Wait()
		if got := b.cmds(); len(got) != 1 {
			t.Fatalf("before the delay, b got %v", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		want := []NoteKind{NoteAsked, NoteAnswered}
		if got := b.cmds(); len(got) != 2 || got[1] != want[1] {
			t.Fatalf("after the delay, b got %v, want %v", got, want)
		}
		if got := a.cmds(); len(got) != 1 {
			t.Errorf("the device that answered got %v", got)
		}

		// A note waiting when the next question comes goes out first.
		rc, _ = ask(h, "tok", "r2", time.Minute, context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r2", Reply{ClientID: "a"}); err != nil {
			t.Fatal(err)
		}
		<-rc
		_, _ = ask(h, "tok", "r3", time.Minute, context.Background())
		synctest.Wait()
		want = append(want, NoteAsked, NoteAnswered, NoteAsked)
		if got := b.cmds(); !slices.Equal(got, want) {
			t.Fatalf("with the next question, b got %v, want %v", got, want)
		}
		time.Sleep(time.Minute / 2)
		synctest.Wait()
		if got := b.cmds(); len(got) != len(want) {
			t.Fatalf("the note went out twice: %v", got)
		}

		// Alone in the room, the answering device has nobody to tell.
		h.Leave("tok", b)
		rc, _ = ask(h, "tok", "r4", time.Minute, context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r4", Reply{ClientID: "a"}); err != nil {
			t.Fatal(err)
		}
		<-rc
	})
}
