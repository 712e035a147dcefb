package mcpbridge_test

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// person is a Backend whose person answers every question at once with
// its first option. The server's is rpc.Local (in process, for /mcp);
// agentassistant-mcp's makes Connect calls. Only the calls New and
// ask_question make are written here.
type person struct {
	mcpbridge.Backend
}

// TakeMissedAnswers: no answer was given while no agent waited.
func (person) TakeMissedAnswers(context.Context, *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return &pb.TakeMissedAnswersResponse{}, nil
}

// GetUIState: this server has no relay session, so no web UI whose
// tools the agent could drive; the bridge lists only its own tools.
func (person) GetUIState(context.Context, *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no relay sessions"))
}

// AskQuestion: an answer names an option by sending its label as a text.
func (person) AskQuestion(_ context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	fmt.Printf("the inbox shows %q with %d options\n", req.GetRequest().GetQuestion(), len(req.GetRequest().GetQuestions()[0].GetOptions()))
	label := req.GetRequest().GetQuestions()[0].GetOptions()[0].GetLabel()
	return &pb.AskQuestionResponse{ID: req.GetID(), Contents: []*pb.McpResultContent{
		{Type: 1, Text: &pb.TextContent{Type: "text", Text: label}},
	}}, "phone", nil
}

// An MCP client calls ask_question; the bridge checks the arguments,
// asks through its Backend and turns the answer into the tool's result,
// the chosen option in words and as structured content.
func Example() {
	s := mcpbridge.New(mcpbridge.Options{Backend: person{}, Token: "token"})
	c, err := client.NewInProcessClient(s.MCPServer)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "example", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		fmt.Println(err)
		return
	}

	call := mcp.CallToolRequest{}
	call.Params.Name = "ask_question"
	call.Params.Arguments = map[string]any{
		"question": "Deploy to production?",
		"options":  []map[string]any{{"label": "Deploy"}, {"label": "Wait"}},
	}
	res, err := c.CallTool(ctx, call)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("error:", res.IsError)
	fmt.Printf("structured: %v\n", res.StructuredContent)
	// Output:
	// the inbox shows "Deploy to production?" with 2 options
	// error: false
	// structured: map[answered:true chosen:[Deploy] images:0 text:]
}
