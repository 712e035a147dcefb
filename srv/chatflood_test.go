package srv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestChatFloodCannotDropTheReceiver: a tab of the token (a leaked token,
// a page gone wrong) sends chat after chat to the owner's phone, which
// reads slower than that. A chat was queued to the phone like anything
// else, so the flood filled the phone's queue and the server dropped the
// phone as too slow: one client took another off, over and over. A chat
// now takes only half the receiver's queue; past it the sender is told
// (receiver_busy) and the phone stays, with room for the questions. The
// owner's agent asks, the phone gets it, answers, the agent has it.
func TestChatFloodCannotDropTheReceiver(t *testing.T) {
	s, url := newServer(t, inbox.Options{SendQueue: 8, WriteWait: time.Minute})
	phone, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer phone.Close()
	b, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "phone"})
	if err := phone.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatal(err)
	}
	phoneID := readFrame(t, phone).GetUserLoginResponse().GetClientId()
	if phoneID == "" {
		t.Fatal("the phone's login has no client ID")
	}
	// The phone reads nothing more until the flood is over.
	tab := login(t, url, tokA, "tab")
	big := strings.Repeat("x", 64<<10)
	const n = 400
	for range n {
		if err := tab.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: phoneID, Content: big}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
		t.Fatal(err)
	}
	busy := 0
	for {
		m, err := tab.Next(10 * time.Second) // only against a hang
		if err != nil {
			t.Fatal(err)
		}
		if m.Cmd == "Error" {
			if c := m.GetError().GetCode(); c != "receiver_busy" {
				t.Fatalf("a chat refused with %q: %v", c, m.GetError())
			}
			busy++
		}
		if m.Cmd == "GetOnlineUsers" && m.GetGetOnlineUsersResponse() != nil {
			if got := m.GetGetOnlineUsersResponse().GetTotalCount(); got != 2 {
				t.Fatalf("after a chat flood %d online, want the phone and the tab; %d chats refused as busy", got, busy)
			}
			break
		}
	}
	if busy == 0 {
		t.Error("no chat of the flood was refused as busy")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan string, 1)
	go func() {
		rep, err := s.Hub().Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "deploy", Text: "Deploy?", Timeout: time.Minute})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- rep.Contents[0].GetText().GetText()
	}()
	for {
		m := readFrame(t, phone)
		if m.Cmd == "AskQuestion" && m.GetAskQuestionRequest().GetID() == "deploy" {
			break
		}
	}
	reply, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "AskQuestionReply", AskQuestionResponse: &pb.AskQuestionResponse{ID: "deploy",
		Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}}}})
	if err := phone.WriteMessage(websocket.BinaryMessage, reply); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "Yes" {
		t.Errorf("the agent got %q", got)
	}
}

// TestChatLineIsBounded: a chat line is for a person to read or a PC to
// type (agentassistant-input types 20,000 characters at most): one of
// 16 MiB, a /ws frame's bound, cost the receiver's queue its whole
// budget. Past 64 KiB it is refused to its sender, the receiver told
// nothing; up to it, delivered.
func TestChatLineIsBounded(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	pc := login(t, url, tokA, "pc")
	tab := login(t, url, tokA, "tab")
	chat := func(content string) {
		t.Helper()
		if err := tab.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: pc.ID, Content: content}}); err != nil {
			t.Fatal(err)
		}
	}
	chat(strings.Repeat("y", 64<<10+1))
	if e := expect(t, tab, "Error").GetError(); e.GetCode() != "invalid_request" || !strings.Contains(e.GetMessage(), "65536 bytes") {
		t.Errorf("a chat line past the bound: %v", e)
	}
	chat(strings.Repeat("z", 64<<10))
	if got := expect(t, pc, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage().GetContent(); got != strings.Repeat("z", 64<<10) {
		t.Errorf("the receiver got a line of %d bytes, want the one of 65536", len(got))
	}
}
