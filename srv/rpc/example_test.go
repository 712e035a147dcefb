package rpc_test

import (
	"context"
	"fmt"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// phone is a device logged in to a room: the /ws door's connection in
// the server. It passes on the requests it is shown.
type phone struct{ asked chan *hub.Note }

func (phone) ID() string             { return "c-1" }
func (phone) Nickname() string       { return "phone" }
func (phone) ConnectedAt() time.Time { return time.Time{} }

// Send must not block: a real connection queues the note's frames.
func (p phone) Send(n *hub.Note) bool {
	if n.Kind == hub.NoteAsked {
		select {
		case p.asked <- n:
		default:
		}
	}
	return true
}

// The services the Connect handlers serve, called in process as the
// /mcp endpoint's bridge calls them (Local is an mcpbridge.Backend): a
// question asked for a token the caller checked waits in the hub until
// a device of that token answers it.
func ExampleServices_Local() {
	h := hub.New(hub.Options{}) // no Store: requests kept in memory
	defer h.Close()
	p := phone{asked: make(chan *hub.Note, 1)}
	h.Join("token", p, nil, hub.Resume{})
	local := rpc.New(rpc.Options{Hub: h}).Local("mcp", "token")

	type outcome struct {
		resp *pb.AskQuestionResponse
		by   string
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		resp, by, err := local.AskQuestion(context.Background(), &pb.AskQuestionRequest{
			ID: "q-1", Request: &pb.McpAskQuestionRequest{Question: "Deploy to production?", Timeout: 60},
		})
		done <- outcome{resp, by, err}
	}()

	n := <-p.asked
	fmt.Println("the phone shows:", n.Request.Text)
	err := local.AskQuestionReply(context.Background(), &pb.AskQuestionReplyRequest{
		Nickname: "phone",
		Response: &pb.AskQuestionResponse{ID: n.Request.ID, Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes."}},
		}},
	})
	if err != nil {
		fmt.Println("answer:", err)
	}
	o := <-done
	if o.err != nil {
		fmt.Println("ask:", o.err)
		return
	}
	fmt.Printf("the agent hears %q from %s\n", o.resp.GetContents()[0].GetText().GetText(), o.by)
	// Output:
	// the phone shows: Deploy to production?
	// the agent hears "Yes." from phone
}
