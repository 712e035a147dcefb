package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// Backend is what the bridge asks of agentassistant-srv. The stdio
// binary's is the server's Connect services over the network (built
// from Options.Client, Control, Reply and UI); the server's own /mcp
// endpoint calls its services in process (Options.Backend). Errors are
// Connect errors: those the server answered with, and, over the network
// only, those a Connect client makes of a broken link.
type Backend interface {
	// AskQuestion asks the person and waits for the answer; by names who
	// answered, when the server says. The call takes the answers given
	// while it was away: it re-attaches by the request's ID.
	AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (resp *pb.AskQuestionResponse, by string, err error)
	// TaskReport reports a finished task and waits for the person's
	// feedback, as AskQuestion does.
	TaskReport(ctx context.Context, req *pb.WorkReportRequest) (resp *pb.AskQuestionResponse, by string, err error)
	// TakeMissedAnswers takes the answers given while no agent waited.
	TakeMissedAnswers(ctx context.Context, req *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error)
	// CancelRequest withdraws a request no one waits for any more.
	CancelRequest(ctx context.Context, req *pb.CancelRequestRequest) error
	// AskQuestionReply and TaskFinishReply put an answer in for the
	// person (first answer wins; FailedPrecondition when another came
	// first or the request ended).
	AskQuestionReply(ctx context.Context, req *pb.AskQuestionReplyRequest) error
	TaskFinishReply(ctx context.Context, req *pb.TaskFinishReplyRequest) error
	UIBackend
}

// UIBackend is what the web UI's tools ask of the server's relay.
type UIBackend interface {
	GetUIState(ctx context.Context, req *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error)
	// CallUITool calls the host's tool in relay session session with
	// params, the members of the JSON object the MCP client sent, as
	// read, and the reason the agent gave.
	CallUITool(ctx context.Context, session, tool string, params map[string]any, reason string) (*pb.CallUIToolResponse, error)
	PostAgentMessage(ctx context.Context, req *pb.AgentMessageRequest) (*pb.AgentMessageResponse, error)
	WaitUserMessage(ctx context.Context, req *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error)
	StartSession(ctx context.Context, req *pb.StartSessionRequest) (*pb.SessionResponse, error)
	EndSession(ctx context.Context, req *pb.EndSessionRequest) (*pb.SessionResponse, error)
}

// connectBackend is the Backend of agentassistant-mcp: Connect calls to
// the server at serverURL. A nil Control takes no missed answers and
// withdraws nothing (the server's orphan grace does); a nil Reply puts
// no answer in (the bridge offers no form then); a nil UI has no web UI
// tools (the bridge lists none then). The UI's calls are the relay
// client's own, but for CallUITool.
type connectBackend struct {
	client  agentassistprotoconnect.SrvAgentAssistClient
	control agentassistprotoconnect.SrvAgentAssistControlClient
	reply   agentassistprotoconnect.SrvAgentAssistReplyClient
	agentassistprotoconnect.SrvUIRelayClient

	serverURL string
	log       *slog.Logger
	// taskFinishOnly is set once the server turned out to be of the
	// TaskFinish generation (no WorkReport).
	taskFinishOnly atomic.Bool
	// upstream is set once the server turned out to be the existing
	// agentassistant's (no SrvAgentAssistControl, asked before every
	// question): its web UI and app show only a request's text, not
	// its Questions, so the options go in the text as well.
	upstream atomic.Bool
}

func (c *connectBackend) AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	ctx, info := takesMissed(ctx)
	if extra := c.optionsText(req.GetRequest().GetQuestions()); extra != "" {
		req = proto.CloneOf(req)
		req.Request.Question += extra
	}
	resp, err := c.client.AskQuestion(ctx, req)
	if err != nil {
		return nil, "", err
	}
	return resp, answeredBy(info.ResponseHeader()), nil
}

// takesMissed says, in the call's header, that the caller takes the
// answers given while it was away (handOver) and re-attaches: its
// requests outlive a dropped call.
func takesMissed(ctx context.Context) (context.Context, connect.CallInfo) {
	ctx, info := connect.NewClientContext(ctx)
	info.RequestHeader().Set(wire.TakesMissedHeader, wire.TakesMissedYes)
	return ctx, info
}

// TaskReport makes the task-report call in the server's generation:
// WorkReport (the current upstream name), or TaskFinish on servers that
// do not have it (they answer Unimplemented, an HTTP 404), which is then
// used for the rest of the process's life. The two carry the same
// fields.
func (c *connectBackend) TaskReport(ctx context.Context, req *pb.WorkReportRequest) (*pb.AskQuestionResponse, string, error) {
	ctx, info := takesMissed(ctx)
	if extra := c.optionsText(req.GetRequest().GetQuestions()); extra != "" {
		req = proto.CloneOf(req)
		req.Request.Summary += extra
	}
	if !c.taskFinishOnly.Load() {
		resp, err := c.client.WorkReport(ctx, req)
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			if err != nil {
				return nil, "", err
			}
			// Same shape on the wire; one conversion path for every kind.
			return &pb.AskQuestionResponse{ID: resp.ID, IsError: resp.IsError, Meta: resp.Meta, Contents: resp.Contents}, answeredBy(info.ResponseHeader()), nil
		}
		c.taskFinishOnly.Store(true)
		c.log.Info("the server has no WorkReport; reporting with TaskFinish", "server", c.serverURL)
	}
	r := req.GetRequest()
	resp, err := c.client.TaskFinish(ctx, &pb.TaskFinishRequest{ID: req.GetID(), UserToken: req.GetUserToken(), Request: &pb.McpTaskFinishRequest{
		ProjectDirectory: r.GetProjectDirectory(), Summary: r.GetSummary(), Timeout: r.GetTimeout(),
		AgentName: r.GetAgentName(), ReasoningModelName: r.GetReasoningModelName(), McpClientName: r.GetMcpClientName(), Questions: r.GetQuestions(),
	}})
	if err != nil {
		return nil, "", err
	}
	return &pb.AskQuestionResponse{ID: resp.ID, IsError: resp.IsError, Meta: resp.Meta, Contents: resp.Contents}, answeredBy(info.ResponseHeader()), nil
}

// optionsText is what follows a request's text on the server: its
// options written out for an upstream server, else nothing (this server
// writes them for its clients that need them).
func (c *connectBackend) optionsText(qs []*pb.Question) string {
	if !c.upstream.Load() {
		return ""
	}
	return wire.OptionsText(qs)
}

func (c *connectBackend) TakeMissedAnswers(ctx context.Context, req *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	if c.control == nil {
		return &pb.TakeMissedAnswersResponse{}, nil
	}
	resp, err := c.control.TakeMissedAnswers(ctx, req)
	if connect.CodeOf(err) == connect.CodeUnimplemented && !c.upstream.Swap(true) {
		c.log.Info("the server is an existing agentassistant-srv (no SrvAgentAssistControl); a request's options go in its text too", "server", c.serverURL)
	}
	return resp, err
}

func (c *connectBackend) CancelRequest(ctx context.Context, req *pb.CancelRequestRequest) error {
	if c.control == nil {
		return nil
	}
	_, err := c.control.CancelRequest(ctx, req)
	return err
}

func (c *connectBackend) AskQuestionReply(ctx context.Context, req *pb.AskQuestionReplyRequest) error {
	_, err := c.reply.AskQuestionReply(ctx, req)
	return err
}

func (c *connectBackend) TaskFinishReply(ctx context.Context, req *pb.TaskFinishReplyRequest) error {
	_, err := c.reply.TaskFinishReply(ctx, req)
	return err
}

// CallUITool sends the parameters as the JSON object the wire carries.
func (c *connectBackend) CallUITool(ctx context.Context, session, tool string, params map[string]any, reason string) (*pb.CallUIToolResponse, error) {
	if params == nil {
		params = map[string]any{}
	}
	pj, err := json.Marshal(params)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("encode params: %w", err))
	}
	return c.SrvUIRelayClient.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: session, ToolName: tool, ParamsJson: string(pj), Reason: reason})
}
