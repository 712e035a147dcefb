package srv_test

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
)

// FuzzWSFrame sends arbitrary bytes as a frame of a logged-in /ws client:
// whatever they are, the server answers or ignores them and the connection
// keeps working.
func FuzzWSFrame(f *testing.F) {
	seed := func(m *pb.WebsocketMessage) []byte { b, _ := proto.Marshal(m); return b }
	for _, b := range [][]byte{
		{}, {0xff}, {0x0a, 0x05, 'A'}, {0x0a, 0x02, 0xc3, 0x28}, {0x12, 0x80, 0x80, 0x80, 0x80, 0x10},
		seed(&pb.WebsocketMessage{Cmd: "AskQuestionReply", AskQuestionRequest: &pb.AskQuestionRequest{ID: "x"}}),
		seed(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "nobody", Content: "hi"}}),
		seed(&pb.WebsocketMessage{Cmd: "CheckMessageValidity", CheckMessageValidityRequest: &pb.CheckMessageValidityRequest{RequestIds: []string{"a", "b"}}}),
		seed(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokB}),
		seed(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}),
	} {
		f.Add(b)
	}
	_, base := newGuarded(&testing.T{}, srv.Options{})
	c, err := wstest.Dial(base, tokA, "fuzz", nil)
	if err != nil || !c.Login.GetSuccess() {
		f.Fatalf("login: %v", err)
	}
	f.Cleanup(func() { c.Close() })
	ping := func() error {
		if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", StrParam: "ping"}); err != nil {
			return err
		}
		for {
			m, err := c.Next(5 * time.Second)
			if err != nil {
				return err
			}
			if m.Cmd == "GetOnlineUsers" {
				return nil
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := c.SendRaw(websocket.BinaryMessage, data); err != nil {
			t.Fatal(err)
		}
		if err := ping(); err != nil {
			t.Fatalf("after %x: %v", data, err)
		}
	})
}
