package srv_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentassistant/agentassistant/internal/lockorder"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/gorilla/websocket"
)

// BenchmarkAskRoundTrip: Connect AskQuestion → /ws client answering at
// once → response, in-process (for profiles; make bench measures from
// outside).
func BenchmarkAskRoundTrip(b *testing.B) {
	lockorder.Pause(b)
	_, base := newGuarded(&testing.T{}, srv.Options{})
	c, err := wstest.Dial(base, tokA, "answerer", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	go func() {
		for {
			m, err := c.Next(1 << 40)
			if err != nil {
				return
			}
			if m.Cmd == "AskQuestion" {
				r := wstest.TextReply(m.GetAskQuestionRequest().GetID(), "ok")
				bb, _ := proto.Marshal(r)
				_ = c.SendRaw(websocket.BinaryMessage, bb)
			}
		}
	}()
	cl := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, base)
	b.ResetTimer()
	for i := range b.N {
		if _, err := cl.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: fmt.Sprint(i), UserToken: tokA, Request: &pb.McpAskQuestionRequest{Question: "q", Timeout: 60}}); err != nil {
			b.Fatal(err)
		}
	}
}
