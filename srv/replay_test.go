package srv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestResumeAfterDisconnect: a device drops off while questions come,
// get answered elsewhere and get withdrawn; when it comes back with the
// last Seq it saw, it gets exactly those events, in order, then live ones.
func TestResumeAfterDisconnect(t *testing.T) {
	s, base := newGuarded(t, srv.Options{})
	h := s.Hub()
	phone := login(t, base, tokA, "phone")
	pc := login(t, base, tokA, "pc")
	epoch := phone.Login.GetEpoch()
	if epoch == "" {
		t.Fatal("no epoch in the login response")
	}

	ask := func(id string) {
		go func() {
			_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: id, Timeout: time.Minute})
		}()
	}
	ask("q1")
	last := expect(t, phone, "AskQuestion").GetSeq()
	expect(t, pc, "AskQuestion")
	phone.Close() // the phone goes offline

	ask("q2")
	expect(t, pc, "AskQuestion")
	if err := pc.Send(wstest.TextReply("q1", "done on the PC")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "q1 settled", func() bool { return !h.Validity(tokA, []string{"q1"})["q1"] })
	ask("q3")
	expect(t, pc, "AskQuestion")
	if err := h.Cancel(context.Background(), tokA, "q2"); err != nil {
		t.Fatal(err)
	}
	expect(t, pc, "RequestCancelled")

	back, err := wstest.DialResume(base, tokA, "phone", nil, epoch, last)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if !back.Login.GetResumed() {
		t.Fatalf("login = %v", back.Login)
	}
	var got []string
	seq := last
	for len(got) < 4 {
		m, err := back.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if m.Cmd == "UserConnectionStatusNotification" || m.Cmd == "GetOnlineUsers" {
			continue
		}
		if m.GetSeq() != seq+1 {
			t.Fatalf("%s with Seq %d after %d", m.Cmd, m.GetSeq(), seq)
		}
		seq = m.GetSeq()
		id := m.GetAskQuestionRequest().GetID() + m.GetRequestCancelledNotification().GetRequestId()
		got = append(got, m.Cmd+":"+id)
	}
	want := "[AskQuestion:q2 AskQuestionReplyNotification:q1 AskQuestion:q3 RequestCancelled:q2]"
	if fmt.Sprint(got) != want {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	if err := back.Quiet(200 * time.Millisecond); err != nil {
		t.Fatalf("more than the missed events: %v", err)
	}
	ask("q4") // and live ones follow
	if m := expect(t, back, "AskQuestion"); m.GetSeq() != seq+1 {
		t.Fatalf("live event Seq %d after %d", m.GetSeq(), seq)
	}

	// Another server run, or a Seq from the future: a full resync.
	for _, r := range []struct {
		epoch string
		from  uint64
	}{{"other-run", last}, {epoch, seq + 100}} {
		c, err := wstest.DialResume(base, tokA, "x", nil, r.epoch, r.from)
		if err != nil {
			t.Fatal(err)
		}
		if c.Login.GetResumed() {
			t.Errorf("resumed from %+v", r)
		}
		if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
			t.Fatal(err)
		}
		m := expect(t, c, "GetPendingMessages")
		if m.GetSeq() < seq+1 || m.GetGetPendingMessagesResponse().GetTotalCount() != 2 { // q3, q4
			t.Errorf("full resync: seq %d, %v", m.GetSeq(), m.GetGetPendingMessagesResponse())
		}
		c.Close()
	}
}
