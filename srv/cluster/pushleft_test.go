package cluster

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// hung is a push service's connection that never answers: a push in
// flight stays so until its instance ends it. inFlight is told of each.
type hung chan struct{}

func (h hung) RoundTrip(r *http.Request) (*http.Response, error) {
	h <- struct{}{}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestCloseLeftByADeadInstanceIsPushed: a question pushed from A is
// answered on B, whose close of it is decided and in flight when B dies
// (kill -9: its Pusher and heartbeat end, its push never answered). The close is on
// NATS, B's: A takes it over once it has stood for TakeOver with B's
// heartbeat gone, and the device gets it, once.
func TestCloseLeftByADeadInstanceIsPushed(t *testing.T) {
	p := newPushPair(t, nil)
	inFlight := make(hung, 10)
	p.ob.Client = &http.Client{Transport: inFlight}
	p.oa.TakeOver = 200 * time.Millisecond
	pusher(t, p.a, p.oa)
	pb := pusher(t, p.b, p.ob)
	p.subscribe()

	p.pushedThenAnsweredOnB()
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("B pushed no close")
	}
	pb.Close() // B dies with its close in flight
	p.b.c.Close()
	p.closedOnce(p.a)
}

// TestCloseOfAQuestionSettledOnADeadInstanceIsPushed: a question pushed
// from A is answered on B, which dies before its Pusher hears of it (its
// close is decided nowhere). A, whose push of it is on record, finds it
// settled for TakeOver, and closes it on the device, once.
func TestCloseOfAQuestionSettledOnADeadInstanceIsPushed(t *testing.T) {
	p := newPushPair(t, nil)
	p.oa.TakeOver = 200 * time.Millisecond
	pusher(t, p.a, p.oa)
	pusher(t, p.b, p.ob).Close() // B's Pusher is gone before the answer
	p.subscribe()

	p.pushedThenAnsweredOnB()
	p.closedOnce(p.a)
}

// TestCloseOfAQuestionSettledOnItsDeadPusherIsPushed: A dies (kill -9)
// as it pushes a question, which it took the answer of just before: no
// instance decides its close, and its record says the push is in
// flight. B finds it settled for TakeOver, the push taken for a dead
// instance's, and closes it on the device, once.
func TestCloseOfAQuestionSettledOnItsDeadPusherIsPushed(t *testing.T) {
	inFlight := make(chan struct{}, 1)
	p := newPushPair(t, func(r *http.Request, m pushOpened) {
		if m.Type == "ask" && m.ID == "q-1" {
			inFlight <- struct{}{}
			<-r.Context().Done() // its instance dies first
		}
	})
	p.ob.TakeOver = 200 * time.Millisecond
	pa := pusher(t, p.a, p.oa)
	pusher(t, p.b, p.ob)
	p.subscribe()

	q1 := ask(context.Background(), p.a, question("q-1", "Deploy?"))
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("A pushed no ask")
	}
	pa.Close() // A's Pusher dies with its push in flight
	if err := p.a.hub.Answer(context.Background(), tok, wire.AskQuestion, "q-1", reply("pc", "yes")); err != nil {
		t.Fatal(err)
	}
	wait(t, q1)
	p.a.c.Close() // and its heartbeat ends
	p.closedOnce(p.b)
}

// pushedThenAnsweredOnB asks q-1 on A, waits until its push is through,
// then answers it on B.
func (p *pushPair) pushedThenAnsweredOnB() {
	p.t.Helper()
	q1 := ask(context.Background(), p.a, question("q-1", "Deploy?"))
	p.seen("", func(asks, _ int) bool { return asks > 0 }) // its ask
	p.pushedFrom(p.oa, "q-1")
	if err := p.b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q-1", reply("pc", "yes")); err != nil {
		p.t.Fatal(err)
	}
	wait(p.t, q1)
}
