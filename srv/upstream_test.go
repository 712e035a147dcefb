package srv_test

// Frames as the existing agentassistant clients (its web UI and Flutter app,
// TaskFinish and WorkReport generations) send and read them.

import (
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// nextStatus returns the next presence notification about client id.
func nextStatus(t *testing.T, c *wstest.Client, id string) *pb.UserConnectionStatusNotification {
	t.Helper()
	for {
		m, err := c.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the presence of %s: %v", id, err)
		}
		if n := m.GetUserConnectionStatusNotification(); n != nil && n.GetUser().GetClientId() == id {
			return n
		}
	}
}

// Upstream clients add a device to their online list on "connected" and
// drop it on "disconnected"; they ignore every other status.
func TestUpstreamPresenceStatus(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	if n := nextStatus(t, a, b.ID); n.GetStatus() != "connected" || n.GetUser().GetNickname() != "phone" {
		t.Errorf("join: %v, want status \"connected\"", n)
	}
	b.Close()
	if n := nextStatus(t, a, b.ID); n.GetStatus() != "disconnected" {
		t.Errorf("leave: %v, want status \"disconnected\"", n)
	}
}

// Upstream sends connected_at, sent_at and the presence timestamp in Unix
// seconds.
func TestUpstreamTimesInSeconds(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	before := time.Now().Unix()
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	inSeconds := func(what string, v int64) {
		t.Helper()
		if after := time.Now().Unix(); v < before || v > after {
			t.Errorf("%s = %d, want Unix seconds in [%d, %d]", what, v, before, after)
		}
	}
	n := nextStatus(t, a, b.ID)
	inSeconds("UserConnectionStatusNotification.user.connected_at", n.GetUser().GetConnectedAt())
	inSeconds("UserConnectionStatusNotification.timestamp", n.GetTimestamp())

	if err := a.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range expect(t, a, "GetOnlineUsers").GetGetOnlineUsersResponse().GetOnlineUsers() {
		inSeconds("OnlineUser.connected_at of "+u.GetNickname(), u.GetConnectedAt())
	}

	if err := b.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: a.ID, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	inSeconds("ChatMessage.sent_at", expect(t, a, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage().GetSentAt())
}

// Upstream's web UI changes the nickname by sending UserLogin again on the
// open connection. The server answers with a login response for the same
// client and tells the others with a "connected" notification carrying the
// new nickname, which everything after uses.
func TestUpstreamRenameByLogin(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	nextStatus(t, a, b.ID)

	if err := b.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "  kitchen tablet "}); err != nil {
		t.Fatal(err)
	}
	r := expect(t, b, "UserLogin").GetUserLoginResponse()
	if !r.GetSuccess() || r.GetClientId() != b.ID || r.GetErrorMessage() != "" {
		t.Fatalf("rename answered %v, want success for client %s", r, b.ID)
	}
	n := nextStatus(t, a, b.ID)
	if n.GetStatus() != "connected" || n.GetUser().GetNickname() != "kitchen tablet" {
		t.Errorf("the others were told %v, want \"connected\" with the new nickname", n)
	}

	if err := a.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	us := expect(t, a, "GetOnlineUsers").GetGetOnlineUsersResponse().GetOnlineUsers()
	if len(us) != 2 || us[1].GetClientId() != b.ID || us[1].GetNickname() != "kitchen tablet" {
		t.Errorf("online users after the rename = %v", us)
	}
	if err := b.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: a.ID, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if cm := expect(t, a, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage(); cm.GetSenderNickname() != "kitchen tablet" {
		t.Errorf("chat after the rename comes from %q", cm.GetSenderNickname())
	}

	// The room stays the one the connection logged in to.
	if err := b.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokB, Nickname: "hopper"}); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, b, "Error").GetError(); e.GetCode() != "invalid_request" || e.GetCmd() != "UserLogin" {
		t.Errorf("login with another token on an open connection: %v", e)
	}
}
