package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// slowClient is a device whose socket takes a question only when the test
// lets it: the question's broadcast is still going out while a quick device
// answers.
type slowClient struct {
	*fakeClient
	gate chan struct{}
}

func (s *slowClient) Send(b []byte) bool {
	var m pb.WebsocketMessage
	if proto.Unmarshal(b, &m) == nil && m.Cmd == wire.CmdAskQuestion {
		<-s.gate
	}
	return s.fakeClient.Send(b)
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
		go func() { answered <- h.Answer("tok", wire.AskQuestion, "r1", Reply{ClientID: "quick"}) }()
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
		want := []string{wire.CmdAskQuestion, wire.CmdAskQuestionReplyNotification}
		if got := slow.cmds(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("the slow device got %v, want %v", got, want)
		}
	})
}
