package srv_test

// Frames as the existing agentassistant clients (its web UI and Flutter app,
// TaskFinish and WorkReport generations) send and read them.

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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

// topFields splits an encoded message into its top-level fields.
func topFields(t *testing.T, b []byte) map[protowire.Number][][]byte {
	t.Helper()
	out := map[protowire.Number][][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("bad field %d: %v", num, protowire.ParseError(m))
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		out[num] = append(out[num], v)
		b = b[m:]
	}
	return out
}

// reencode is a received frame's bytes again (unknown fields kept).
func reencode(t *testing.T, m *pb.WebsocketMessage) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Upstream's generated code of the TaskFinish era has SendBackspaceRequest
// (receiver_client_id = 1) at WebsocketMessage field 25, Cmd
// "SendBackspace": the remote-input backspace. The server routes it to the
// receiver like a chat message, and its own frames never use field 25 for
// anything else.
func TestUpstreamField25IsSendBackspace(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	pc := login(t, url, tokA, "pc")
	phone := login(t, url, tokA, "phone")
	nextStatus(t, pc, phone.ID)

	// An Error frame (here: chat to a device that is not there) does not
	// use field 25.
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "gone", Content: "x"}}); err != nil {
		t.Fatal(err)
	}
	e := expect(t, phone, "Error")
	if f := topFields(t, reencode(t, e)); len(f[25]) != 0 {
		t.Errorf("the Error frame uses field 25, which upstream clients decode as SendBackspaceRequest: %v", e)
	}

	// As upstream's code encodes it: Cmd = 1, SendBackspaceRequest = 25.
	var frame []byte
	frame = protowire.AppendTag(frame, 1, protowire.BytesType)
	frame = protowire.AppendString(frame, "SendBackspace")
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, pc.ID)
	frame = protowire.AppendTag(frame, 25, protowire.BytesType)
	frame = protowire.AppendBytes(frame, req)
	if err := phone.SendRaw(websocket.BinaryMessage, frame); err != nil {
		t.Fatal(err)
	}
	got := expect(t, pc, "SendBackspace")
	f := topFields(t, reencode(t, got))
	if len(f[25]) != 1 {
		t.Errorf("the receiver got %v, want field 25", got)
	} else if r := topFields(t, f[25][0])[1]; len(r) != 1 || string(r[0]) != pc.ID {
		t.Errorf("the receiver got %v, want receiver_client_id %s in field 25", got, pc.ID)
	}
	if got.GetStrParam() != phone.ID || got.GetNickname() != "phone" {
		t.Errorf("the receiver cannot tell who sent it: StrParam %q, Nickname %q", got.GetStrParam(), got.GetNickname())
	}
	if err := phone.Quiet(100 * time.Millisecond); err != nil {
		t.Errorf("the sender: %v", err)
	}

}
