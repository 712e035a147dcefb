package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// ask is an agent's request made on a goroutine of its own; the
// channel gets its outcome.
func ask(h *hub.Hub, ctx context.Context, kind wire.Kind, id string) <-chan askResult {
	out := make(chan askResult, 1)
	go func() {
		rep, err := h.Ask(ctx, tokA, hub.Request{Kind: kind, ID: id, ProjectDirectory: "/src/app", Text: "Ship it?", Timeout: time.Hour})
		out <- askResult{rep, err}
	}()
	return out
}

type askResult struct {
	rep *hub.Reply
	err error
}

// TestAnswerFrames: each frame a person answers with becomes the hub's
// Answer of the request it names, of the kind it names, by this client:
// the agent gets what the person sent.
func TestAnswerFrames(t *testing.T) {
	t.Parallel()
	text := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes."}}}
	meta := map[string]string{"source": "phone"}
	for _, tc := range []struct {
		name  string
		kind  wire.Kind
		shown []string // the frames the request is shown as
		frame *pb.WebsocketMessage
	}{
		{"AskQuestionReply", wire.AskQuestion, []string{wire.CmdAskQuestion}, &pb.WebsocketMessage{
			Cmd:                 wire.CmdAskQuestionReply,
			AskQuestionRequest:  &pb.AskQuestionRequest{ID: "q"},
			AskQuestionResponse: &pb.AskQuestionResponse{ID: "q", IsError: true, Meta: meta, Contents: text},
		}},
		{"AskQuestionReply naming it in the response only", wire.AskQuestion, []string{wire.CmdAskQuestion}, &pb.WebsocketMessage{
			Cmd:                 wire.CmdAskQuestionReply,
			AskQuestionResponse: &pb.AskQuestionResponse{ID: "q", IsError: true, Meta: meta, Contents: text},
		}},
		{"TaskFinishReply", wire.TaskFinish, []string{wire.CmdTaskFinish, wire.CmdWorkReport}, &pb.WebsocketMessage{
			Cmd:                wire.CmdTaskFinishReply,
			TaskFinishRequest:  &pb.TaskFinishRequest{ID: "q"},
			TaskFinishResponse: &pb.TaskFinishResponse{ID: "q", IsError: true, Meta: meta, Contents: text},
		}},
		{"WorkReportReply", wire.TaskFinish, []string{wire.CmdTaskFinish, wire.CmdWorkReport}, &pb.WebsocketMessage{
			Cmd:                wire.CmdWorkReportReply,
			TaskFinishResponse: &pb.TaskFinishResponse{ID: "q", IsError: true, Meta: meta, Contents: text},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, inbox.Options{})
				c := f.login(t, tokA, "phone")
				asked := ask(f.hub, context.Background(), tc.kind, "q")
				for _, cmd := range tc.shown {
					expect(t, c, cmd)
				}
				send(t, c, tc.frame)
				got := <-asked
				if got.err != nil {
					t.Fatal(got.err)
				}
				r := got.rep
				if r.ClientID != c.ID || r.Nickname != "phone" || r.Door != "ws" || !r.IsError || r.Meta["source"] != "phone" ||
					len(r.Contents) != 1 || !proto.Equal(r.Contents[0], text[0]) {
					t.Fatalf("the agent got %+v", r)
				}
			})
		})
	}
}

// TestRefusedFrames: a logged-in client's frame the hub cannot act on is
// answered with an Error frame saying why, about which request and Cmd;
// the connection stays.
func TestRefusedFrames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		frame *pb.WebsocketMessage
		code  string
		id    string // the request the error is about
		says  string
	}{
		{"an answer naming no request", &pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReply, AskQuestionResponse: &pb.AskQuestionResponse{}},
			"invalid_request", "", "needs the request ID"},
		{"an answer to no pending request", &pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReply, AskQuestionRequest: &pb.AskQuestionRequest{ID: "gone"}},
			"not_pending", "gone", hub.ErrNotPending.Error()},
		{"a report's answer to a question", &pb.WebsocketMessage{Cmd: wire.CmdTaskFinishReply, TaskFinishRequest: &pb.TaskFinishRequest{ID: "q"}},
			"not_pending", "q", hub.ErrNotPending.Error()},
		{"a chat line to nobody", &pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage, SendChatMessageRequest: &pb.SendChatMessageRequest{Content: "hi"}},
			"invalid_request", "", "needs receiver_client_id and content"},
		{"a blank chat line", &pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage, SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "x", Content: " \n"}},
			"invalid_request", "", "needs receiver_client_id and content"},
		{"a chat line to a device not here", &pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage, SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "x", Content: "hi"}},
			"receiver_offline", "", hub.ErrNoReceiver.Error()},
		{"a backspace to nobody", &pb.WebsocketMessage{Cmd: wire.CmdSendBackspace, SendBackspaceRequest: &pb.SendBackspaceRequest{}},
			"invalid_request", "", "needs receiver_client_id"},
		{"a login to another room", &pb.WebsocketMessage{Cmd: wire.CmdUserLogin, StrParam: tokB, Nickname: "spy"},
			"invalid_request", "", "already logged in with another token"},
		{"an unknown Cmd", &pb.WebsocketMessage{Cmd: "Explode"}, "unknown_cmd", "", `unknown Cmd "Explode"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, inbox.Options{})
				c := f.login(t, tokA, "phone")
				asked := ask(f.hub, context.Background(), wire.AskQuestion, "q")
				expect(t, c, wire.CmdAskQuestion)
				send(t, c, tc.frame)
				e := expect(t, c, wire.CmdError).GetError()
				if e.GetCode() != tc.code || e.GetRequestId() != tc.id || e.GetCmd() != tc.frame.Cmd || !strings.Contains(e.GetMessage(), tc.says) {
					t.Fatalf("told %v, want %s about %q saying %q", e, tc.code, tc.id, tc.says)
				}
				// Still connected, and the question still pending.
				send(t, c, &pb.WebsocketMessage{Cmd: wire.CmdCheckMessageValidity,
					CheckMessageValidityRequest: &pb.CheckMessageValidityRequest{RequestIds: []string{"q"}}})
				if v := expect(t, c, wire.CmdCheckMessageValidity).GetCheckMessageValidityResponse().GetValidity(); !v["q"] {
					t.Fatalf("validity %v", v)
				}
				select {
				case got := <-asked:
					t.Fatalf("the agent got %+v, %v", got.rep, got.err)
				default:
				}
			})
		})
	}
}

// TestRoomFrames: what a client asks of its room is the hub's view of
// that room only: the pending requests, the devices online, and a chat
// line or a backspace goes to the device it names in the room, never to
// another room's.
func TestRoomFrames(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		phone := f.login(t, tokA, "phone")
		laptop := f.login(t, tokA, "laptop")
		other := f.login(t, tokB, "other")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ask(f.hub, ctx, wire.AskQuestion, "q")
		expect(t, phone, wire.CmdAskQuestion)
		expect(t, laptop, wire.CmdAskQuestion)

		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages})
		ps := expect(t, phone, wire.CmdGetPendingMessages).GetGetPendingMessagesResponse()
		if ps.GetTotalCount() != 1 || ps.GetPendingMessages()[0].GetAskQuestionRequest().GetID() != "q" {
			t.Fatalf("pending %v", ps)
		}
		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdGetOnlineUsers})
		var names []string
		for _, u := range expect(t, phone, wire.CmdGetOnlineUsers).GetGetOnlineUsersResponse().GetOnlineUsers() {
			names = append(names, u.Nickname)
		}
		if strings.Join(names, ",") != "phone,laptop" {
			t.Fatalf("online %v", names)
		}

		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage,
			SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: laptop.ID, Content: "on my way"}})
		m := expect(t, laptop, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
		if m.GetContent() != "on my way" || m.GetSenderClientId() != phone.ID || m.GetSenderNickname() != "phone" {
			t.Fatalf("chat %v", m)
		}
		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdSendBackspace,
			SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: laptop.ID}})
		if b := expect(t, laptop, wire.CmdSendBackspace); b.GetStrParam() != phone.ID {
			t.Fatalf("backspace %v", b)
		}
		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage,
			SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: other.ID, Content: "hello?"}})
		if e := expect(t, phone, wire.CmdError).GetError(); e.GetCode() != "receiver_offline" {
			t.Fatalf("a chat line to another room: %v", e)
		}

		// A rename is announced to the room as the device connecting again.
		send(t, phone, &pb.WebsocketMessage{Cmd: wire.CmdUserLogin, StrParam: tokA, Nickname: "old phone"})
		if r := expect(t, phone, wire.CmdUserLogin); !r.GetUserLoginResponse().GetSuccess() || r.GetNickname() != "old phone" {
			t.Fatalf("rename answered %v", r)
		}
		var renamed bool
		for _, u := range f.hub.OnlineUsers(tokA) {
			renamed = renamed || u.ID == phone.ID && u.Nickname == "old phone"
		}
		if !renamed {
			t.Fatalf("online %v", f.hub.OnlineUsers(tokA))
		}

		// The agent withdraws it: every device is told.
		if err := f.hub.Cancel(context.Background(), tokA, "q"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*wstest.Client{phone, laptop} {
			m, err := c.Expect(wire.CmdRequestCancelled, wait)
			if err != nil || m.GetRequestCancelledNotification().GetRequestId() != "q" {
				t.Fatalf("cancel told %v, %v", m, err)
			}
		}
		synctest.Wait()
		if err := other.Quiet(time.Second); err != nil {
			t.Fatalf("the other room heard: %v", err)
		}
	})
}

// TestSlowClientIsDropped: a client that does not read what it is sent
// is dropped once SendQueue frames wait for it: what waited is let go,
// the close says why, and the other clients of its room get every frame
// meanwhile, with nothing to wait for.
func TestSlowClientIsDropped(t *testing.T) {
	t.Parallel()
	const queue = 4
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{SendQueue: queue})
		fast := f.login(t, tokA, "fast")

		// The slow client logs in and reads nothing more: on a pipe, the
		// server's first write to it blocks until it reads.
		slow, _, err := f.dialer.Dial("ws://127.0.0.1/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		login, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdUserLogin, StrParam: tokA, Nickname: "slow"})
		if err := slow.WriteMessage(websocket.BinaryMessage, login); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n, _ := f.hub.Status(tokA); n != 2 {
			t.Fatalf("%d clients in the room", n)
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const asks = queue + 2
		for i := range asks {
			ask(f.hub, ctx, wire.AskQuestion, string(rune('a'+i)))
			synctest.Wait() // the fast client has read it: its queue is empty
			expect(t, fast, wire.CmdAskQuestion)
		}

		// The slow client reads at last: what was being written when it
		// stopped, then the close; none of what waited.
		var got []string
		_ = slow.SetReadDeadline(time.Now().Add(wait)) // a close that never comes fails the test
		for {
			_, b, err := slow.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "send queue full" {
					t.Fatalf("after %v: %v", got, err)
				}
				break
			}
			var m pb.WebsocketMessage
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Cmd)
		}
		if len(got) != 1 || got[0] != wire.CmdUserLogin {
			t.Fatalf("the slow client got %v before the close", got)
		}
		synctest.Wait()
		if n, _ := f.hub.Status(tokA); n != 1 {
			t.Fatalf("%d clients in the room after the drop", n)
		}
	})
}
