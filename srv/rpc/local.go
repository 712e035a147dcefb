package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Local is the services called in process by one caller of the server
// itself (the /mcp endpoint's bridge of one token): the same handlers as
// the Connect calls, with no HTTP, no Connect and no second pass of the
// guards between. The caller has checked the token. Its methods are
// those of mcpbridge.Backend; errors are the Connect errors a network
// caller would get.
type Local struct {
	s *service
	c caller
}

// Local returns the services for calls through door with token, which
// the caller checked. Such a caller takes the answers given while it was
// away, as agentassistant-mcp does.
func (v *Services) Local(door, token string) *Local {
	return &Local{s: v.s, c: caller{token: token, door: door, takesMissed: true}}
}

// AskQuestion asks the person and waits; by is who answered.
func (l *Local) AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	rep, id, err := l.s.askQuestion(ctx, l.c, req)
	if err != nil {
		return nil, "", err
	}
	return askResponse(id, rep), rep.Nickname, nil
}

// TaskReport reports a finished task and waits for the person's
// feedback (WorkReport); by is who answered.
func (l *Local) TaskReport(ctx context.Context, req *pb.WorkReportRequest) (*pb.AskQuestionResponse, string, error) {
	rep, id, err := l.s.workReport(ctx, l.c, req.GetID(), req.GetRequest())
	if err != nil {
		return nil, "", err
	}
	return askResponse(id, rep), rep.Nickname, nil
}

// Reattach waits for the outcome of the request id, of kind and digest
// sum (wire.Digest), without asking it: a call resumed through another
// instance of a cluster than the one it was made through (the /mcp
// endpoint's). It returns the request's choices with the answer;
// NotFound when no such request is pending or kept.
func (l *Local) Reattach(ctx context.Context, kind wire.Kind, id string, sum [32]byte) (*pb.AskQuestionResponse, []*pb.Question, string, error) {
	rep, qs, err := l.s.o.Hub.Reattach(ctx, l.c.token, kind, id, sum)
	if err != nil {
		return nil, nil, "", askError(err, id, "no reply before the request's timeout; it was withdrawn")
	}
	return askResponse(id, rep), qs, rep.Nickname, nil
}

// TakeMissedAnswers hands over, once, the answers given while no call
// of this token waited for them.
func (l *Local) TakeMissedAnswers(_ context.Context, req *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return controlService{l.s}.takeMissed(l.c.token, req)
}

// CancelRequest withdraws a pending request from every screen.
func (l *Local) CancelRequest(ctx context.Context, req *pb.CancelRequestRequest) error {
	_, err := controlService{l.s}.cancel(ctx, l.c.token, req)
	return err
}

// AskQuestionReply answers a question as a device of this token would;
// the first answer wins.
func (l *Local) AskQuestionReply(ctx context.Context, req *pb.AskQuestionReplyRequest) error {
	resp := req.GetResponse()
	_, err := replyService{l.s}.answer(ctx, l.c, wire.AskQuestion, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
	return err
}

// TaskFinishReply answers a task report as a device of this token would.
func (l *Local) TaskFinishReply(ctx context.Context, req *pb.TaskFinishReplyRequest) error {
	resp := req.GetResponse()
	_, err := replyService{l.s}.answer(ctx, l.c, wire.TaskFinish, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
	return err
}

// viaRelay makes a UI call through the relay, which a server without
// relay sessions answers with CodeUnimplemented.
func viaRelay[Req relayed, Resp any](ctx context.Context, l *Local, call func(context.Context, *relay.Local, Req) (Resp, error), req Req) (Resp, error) {
	if l.s.o.Relay == nil {
		var none Resp
		return none, connect.NewError(connect.CodeUnimplemented, errors.New("this server has no relay sessions"))
	}
	return onLocal(ctx, l.s.o.Relay, l.c.token, call, req)
}

// GetUIState reads the state and tools the relay session's host
// published.
func (l *Local) GetUIState(ctx context.Context, req *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return viaRelay(ctx, l, getUIState, req)
}

// CallUITool calls the host's tool with params, the members of the JSON
// object the MCP client sent, as read: they are encoded once, into the
// tool.call.
func (l *Local) CallUITool(ctx context.Context, session, tool string, params map[string]any, reason string) (*pb.CallUIToolResponse, error) {
	if params == nil {
		params = map[string]any{}
	}
	return viaRelay(ctx, l, callTool, toolRequest{session, toolCall{Params: params, Reason: reason, ToolName: tool}})
}

// PostAgentMessage shows the agent's message in the relay session's
// host.
func (l *Local) PostAgentMessage(ctx context.Context, req *pb.AgentMessageRequest) (*pb.AgentMessageResponse, error) {
	return viaRelay(ctx, l, postAgentMessage, req)
}

// WaitUserMessage takes the next message the person sent in the host,
// waiting a while for one.
func (l *Local) WaitUserMessage(ctx context.Context, req *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error) {
	return viaRelay(ctx, l, waitUserMessage, req)
}

// StartSession starts a study session in the relay session.
func (l *Local) StartSession(ctx context.Context, req *pb.StartSessionRequest) (*pb.SessionResponse, error) {
	return viaRelay(ctx, l, startSession, req)
}

// EndSession ends the relay session's study session.
func (l *Local) EndSession(ctx context.Context, req *pb.EndSessionRequest) (*pb.SessionResponse, error) {
	return viaRelay(ctx, l, endSession, req)
}
