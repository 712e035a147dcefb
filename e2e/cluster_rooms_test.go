package e2e

import (
	"context"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// presenceOf waits for d's next presence notification about who and
// returns its status.
func presenceOf(t *testing.T, d *wstest.Client, who string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, err := d.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("no presence notification about %s: %v", who, err)
		}
		if n := m.GetUserConnectionStatusNotification(); n.GetUser().GetClientId() == who {
			return n.GetStatus()
		}
	}
}

// onlineIDs asks d for the online list.
func onlineIDs(t *testing.T, d *wstest.Client) map[string]bool {
	t.Helper()
	if err := d.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
		t.Fatal(err)
	}
	m := must[*pb.WebsocketMessage](t)(d.Expect("GetOnlineUsers", 10*time.Second))
	out := map[string]bool{}
	for _, u := range m.GetGetOnlineUsersResponse().GetOnlineUsers() {
		out[u.GetClientId()] = true
	}
	return out
}

// TestClusterPresenceAndChat: devices on three instances see each other
// come online and in the online list, and a chat line from the device on
// A reaches the one on C.
func TestClusterPresenceAndChat(t *testing.T) {
	c := startCluster(t)
	onA := dial(t, c.srvs[0], tokenA, "pc")
	onB := dial(t, c.srvs[1], tokenA, "tablet")
	if s := presenceOf(t, onA, onB.ID, 15*time.Second); s != "connected" {
		t.Fatalf("A's device told %q of B's", s)
	}
	onC := dial(t, c.srvs[2], tokenA, "phone")
	for _, d := range []*wstest.Client{onA, onB} {
		if s := presenceOf(t, d, onC.ID, 15*time.Second); s != "connected" {
			t.Fatalf("told %q of C's device", s)
		}
	}
	for _, d := range []*wstest.Client{onA, onB, onC} {
		if ids := onlineIDs(t, d); !ids[onA.ID] || !ids[onB.ID] || !ids[onC.ID] || len(ids) != 3 {
			t.Fatalf("online list on %s: %v", d.ID, ids)
		}
	}
	if err := onA.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage",
		SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: onC.ID, Content: "Lunch?"}}); err != nil {
		t.Fatal(err)
	}
	msg := must[*pb.WebsocketMessage](t)(onC.Expect("ChatMessageNotification", 10*time.Second)).GetChatMessageNotification().GetChatMessage()
	if msg.GetContent() != "Lunch?" || msg.GetSenderClientId() != onA.ID || msg.GetSenderNickname() != "pc" {
		t.Fatalf("C's device got %v", msg)
	}
	onB.Close()
	if s := presenceOf(t, onC, onB.ID, 15*time.Second); s != "disconnected" {
		t.Fatalf("C's device told %q of B's leaving", s)
	}
	if err := onA.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage",
		SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: onB.ID, Content: "gone?"}}); err != nil {
		t.Fatal(err)
	}
	if e := must[*pb.WebsocketMessage](t)(onA.Expect("Error", 10*time.Second)).GetError(); e.GetCode() != "receiver_offline" {
		t.Fatalf("chat to a device gone: %v", e)
	}
}

// TestClusterKill9Presence: the instance holding a device is killed
// (kill -9); the device drops out of the others' lists once the dead
// instance's heartbeat expires, and appears again when it reconnects
// through another instance.
func TestClusterKill9Presence(t *testing.T) {
	c := startCluster(t)
	watcher := dial(t, c.srvs[1], tokenA, "watcher")
	phone := dial(t, c.srvs[0], tokenA, "phone")
	if s := presenceOf(t, watcher, phone.ID, 15*time.Second); s != "connected" {
		t.Fatalf("told %q", s)
	}
	c.srvs[0].kill9(t)
	// Five heartbeats of 2s, and one check: well within 30s.
	if s := presenceOf(t, watcher, phone.ID, 30*time.Second); s != "disconnected" {
		t.Fatalf("told %q of the dead instance's device", s)
	}
	if ids := onlineIDs(t, watcher); ids[phone.ID] {
		t.Fatalf("the dead instance's device is still listed: %v", ids)
	}
	back := dial(t, c.srvs[2], tokenA, "phone")
	if s := presenceOf(t, watcher, back.ID, 15*time.Second); s != "connected" {
		t.Fatalf("told %q of the device back", s)
	}
	if ids := onlineIDs(t, watcher); !ids[back.ID] || len(ids) != 2 {
		t.Fatalf("online list after the device came back: %v", ids)
	}
}

// TestClusterReplayElsewhere: the instance holding a phone is killed
// (kill -9) after the phone saw a question; meanwhile the question is
// answered on B and another asked through C; the phone comes back on B
// with the epoch and number it holds and gets what it missed, in order,
// each once.
func TestClusterReplayElsewhere(t *testing.T) {
	c := startCluster(t)
	phone := dial(t, c.srvs[0], tokenA, "phone")
	pc := dial(t, c.srvs[1], tokenA, "pc")
	first := make(chan error, 1)
	go func() {
		_, err := connectAsk(context.Background(), c.srvs[2], "first", "First?")
		first <- err
	}()
	q1 := must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestion", 10*time.Second))
	must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))
	c.srvs[0].kill9(t)

	if err := pc.Send(wstest.TextReply("first", "Yes.")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the agent never got the answer")
	}
	go func() { _, _ = connectAsk(context.Background(), c.srvs[2], "second", "Second?") }()
	must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))

	back, err := wstest.DialResume(c.srvs[1].URL, tokenA, "phone", nil, phone.Login.GetEpoch(), q1.GetSeq())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close() })
	if !back.Login.GetResumed() {
		t.Fatalf("not resumed on B: %v", back.Login)
	}
	var got []string
	last := q1.GetSeq()
	for len(got) < 2 {
		m, err := back.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("replay so far %v: %v", got, err)
		}
		switch m.Cmd {
		case "UserConnectionStatusNotification", "GetOnlineUsers":
			continue
		}
		if m.GetSeq() <= last {
			t.Fatalf("%s numbered %d after %d", m.Cmd, m.GetSeq(), last)
		}
		last = m.GetSeq()
		got = append(got, m.Cmd+" "+m.GetAskQuestionRequest().GetID())
	}
	if got[0] != "AskQuestionReplyNotification first" || got[1] != "AskQuestion second" {
		t.Fatalf("replayed %v", got)
	}
	for {
		m, err := back.Next(time.Second)
		if err != nil {
			break // nothing more
		}
		if m.Cmd != "UserConnectionStatusNotification" {
			t.Fatalf("replayed more: %s %v", m.Cmd, m.GetSeq())
		}
	}
}
