package rpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Timeouts of the relay calls: well under the ~60s an MCP client allows.
const (
	hostCallTimeout  = 20 * time.Second
	followUpWait     = 1500 * time.Millisecond // for the state.updated after a result without uiSpec
	defaultUserWait  = 30 * time.Second
	maxUserWait      = 10 * time.Minute
	agentMsgGrace    = 300 * time.Millisecond
	hostTimeoutError = "the host did not answer within %s; the action may or may not have happened"
)

// onLocal makes call, one of SrvUIRelay's for a token already checked,
// as the in-process agent of token in the relay session req names: for
// the Connect handler (uiHandler) and the in-process calls (Local) alike.
func onLocal[Req relayed, Resp any](ctx context.Context, r *relay.Relay, token string, call func(context.Context, *relay.Local, Req) (Resp, error), req Req) (Resp, error) {
	if !relay.ValidSession(req.GetRelaySession()) {
		var none Resp
		return none, badSession()
	}
	l := r.Local(token, req.GetRelaySession())
	defer l.Close()
	return call(ctx, l, req)
}

// relayed is a UI call's request, which names its relay session.
type relayed interface{ GetRelaySession() string }

// badSession refuses a relay session name no session can have.
func badSession() error {
	return connect.NewError(connect.CodeInvalidArgument, errors.New("relay_session: "+wire.NameRule))
}

// uiHandler serves SrvUIRelay over Connect, for the token its
// interceptor checked.
type uiHandler struct{ r *relay.Relay }

func (h uiHandler) StartSession(ctx context.Context, req *pb.StartSessionRequest) (*pb.SessionResponse, error) {
	return onLocal(ctx, h.r, tokenOf(ctx), startSession, req)
}

func (h uiHandler) EndSession(ctx context.Context, req *pb.EndSessionRequest) (*pb.SessionResponse, error) {
	return onLocal(ctx, h.r, tokenOf(ctx), endSession, req)
}

func (h uiHandler) GetUIState(ctx context.Context, req *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return onLocal(ctx, h.r, tokenOf(ctx), getUIState, req)
}

// paramsProblem says what keeps params from being forwarded, "" when
// nothing does. Forwarded as written, they must have one meaning: the
// host (a JavaScript page) keeps the last of a key given twice, and
// cannot read 1e999999 at all.
func paramsProblem(params json.RawMessage) string {
	if params[0] != '{' {
		return "params must be a JSON object"
	}
	if err := strictjson.Check(params); err != nil {
		return "params must be a JSON object: " + err.Error()
	}
	return ""
}

// CallUITool takes the parameters as the JSON object the wire carries
// and forwards it as it is.
func (h uiHandler) CallUITool(ctx context.Context, req *pb.CallUIToolRequest) (*pb.CallUIToolResponse, error) {
	params := json.RawMessage(strings.TrimSpace(req.GetParamsJson()))
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if !relay.ValidSession(req.GetRelaySession()) {
		return nil, badSession()
	}
	if bad := paramsProblem(params); bad != "" {
		return &pb.CallUIToolResponse{Error: &pb.RelayError{Code: wire.InvalidParams, Message: bad}}, nil
	}
	return onLocal(ctx, h.r, tokenOf(ctx), callTool, toolRequest{req.GetRelaySession(), toolCall{Params: params, Reason: req.GetReason(), ToolName: req.GetToolName()}})
}

func (h uiHandler) PostAgentMessage(ctx context.Context, req *pb.AgentMessageRequest) (*pb.AgentMessageResponse, error) {
	return onLocal(ctx, h.r, tokenOf(ctx), postAgentMessage, req)
}

func (h uiHandler) WaitUserMessage(ctx context.Context, req *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error) {
	return onLocal(ctx, h.r, tokenOf(ctx), waitUserMessage, req)
}

// request makes one call to the host and splits the answer into the reply
// or the protocol error.
func request(ctx context.Context, l *relay.Local, typ string, payload any, timeout time.Duration) (relay.Reply, *pb.RelayError) {
	b, err := json.Marshal(payload)
	if err != nil {
		return relay.Reply{}, &pb.RelayError{Code: wire.InvalidParams, Message: err.Error()}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env, err := l.Request(cctx, typ, b)
	if err != nil {
		if ctx.Err() != nil {
			return env, &pb.RelayError{Code: wire.ToolExecutionFailed, Message: "cancelled by the agent; the action may or may not have happened"}
		}
		return env, &pb.RelayError{Code: wire.ToolExecutionFailed, Message: fmt.Sprintf(hostTimeoutError, timeout)}
	}
	if env.Type == wire.TypeError {
		return env, relayError(env.Payload)
	}
	return env, nil
}

func relayError(p json.RawMessage) *pb.RelayError {
	var e relay.Error
	_ = json.Unmarshal(p, &e)
	return &pb.RelayError{Code: cmp.Or(e.Code, wire.ToolExecutionFailed), Message: e.Message}
}

func startSession(ctx context.Context, l *relay.Local, req *pb.StartSessionRequest) (*pb.SessionResponse, error) {
	env, rerr := request(ctx, l, wire.TypeSessionStart, map[string]string{
		"studyId": req.GetStudyId(), "participantId": req.GetParticipantId(),
	}, hostCallTimeout)
	if rerr != nil {
		return &pb.SessionResponse{Error: rerr}, nil
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	return &pb.SessionResponse{StudySessionId: p.SessionID}, nil
}

func endSession(ctx context.Context, l *relay.Local, req *pb.EndSessionRequest) (*pb.SessionResponse, error) {
	reason := cmp.Or(req.GetReason(), "ended-by-agent")
	env, rerr := request(ctx, l, wire.TypeSessionEnd, map[string]string{"reason": reason}, hostCallTimeout)
	if rerr != nil {
		return &pb.SessionResponse{Error: rerr}, nil
	}
	var p struct {
		SessionID string `json:"sessionId"`
		LogFile   string `json:"logFile"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	return &pb.SessionResponse{StudySessionId: p.SessionID, LogFile: p.LogFile}, nil
}

func getUIState(ctx context.Context, l *relay.Local, req *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	if req.GetRefresh() {
		if _, rerr := request(ctx, l, wire.TypeSnapshotGet, struct{}{}, hostCallTimeout); rerr != nil {
			return &pb.GetUIStateResponse{Error: rerr, State: uiState(l.State())}, nil
		}
	}
	return &pb.GetUIStateResponse{State: uiState(l.State())}, nil
}

// toolCall is a tool.call's payload. Its members are in the order
// encoding/json writes a map's: the bytes are those of every earlier
// version.
type toolCall struct {
	// Params is a JSON object: the wire's bytes (json.RawMessage) or
	// the members an MCP client sent, as read (map[string]any).
	Params   any    `json:"params"`
	Reason   string `json:"reason"`
	ToolName string `json:"toolName"`
}

// toolRequest is a tool call in a relay session.
type toolRequest struct {
	session string
	call    toolCall
}

func (t toolRequest) GetRelaySession() string { return t.session }

// callTool calls a host's tool, encoding the call once.
func callTool(ctx context.Context, l *relay.Local, t toolRequest) (*pb.CallUIToolResponse, error) {
	call := t.call
	env, rerr := request(ctx, l, wire.TypeToolCall, call, hostCallTimeout)
	if rerr != nil {
		return &pb.CallUIToolResponse{Error: rerr, State: uiState(l.State())}, nil
	}
	var res struct {
		OK      *bool           `json:"ok"`
		UISpec  json.RawMessage `json:"uiSpec"`
		Code    string          `json:"code"`
		Message string          `json:"message"`
	}
	_ = json.Unmarshal(env.Payload, &res)
	out := &pb.CallUIToolResponse{ResultJson: string(env.Payload)}
	if res.OK != nil && !*res.OK {
		code := cmp.Or(res.Code, wire.ToolExecutionFailed)
		// The agent is told what it knows, not nothing.
		msg := cmp.Or(res.Message, "the host reported that "+call.ToolName+" failed, without saying why")
		out.Error = &pb.RelayError{Code: code, Message: msg}
	}
	st := l.State()
	if len(res.UISpec) == 0 || string(res.UISpec) == "null" {
		// next, prev and postMessage may confirm with ok alone: the new
		// state comes in the state.updated that follows.
		st = l.WaitState(ctx, env.StateVersion, followUpWait)
	}
	out.State = uiState(st)
	return out, nil
}

func postAgentMessage(ctx context.Context, l *relay.Local, req *pb.AgentMessageRequest) (*pb.AgentMessageResponse, error) {
	b, _ := json.Marshal(map[string]string{"text": req.GetText()})
	if env, failed := l.Post(ctx, wire.TypeAgentMessage, b, agentMsgGrace); failed {
		return &pb.AgentMessageResponse{Error: relayError(env.Payload)}, nil
	}
	return &pb.AgentMessageResponse{}, nil
}

func waitUserMessage(ctx context.Context, l *relay.Local, req *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error) {
	d := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	opt.Default(&d, defaultUserWait)
	d = min(d, maxUserWait)
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	env, ok := l.NextUserMessage(cctx)
	if !ok {
		return &pb.WaitUserMessageResponse{}, nil
	}
	var p struct {
		Text  string `json:"text"`
		Stage string `json:"stage"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	return &pb.WaitUserMessageResponse{Received: true, Text: p.Text, Stage: p.Stage, PayloadJson: string(env.Payload)}, nil
}

func uiState(s relay.State) *pb.UIState {
	tools, _ := json.Marshal(s.Tools)
	if s.Tools == nil {
		tools = []byte("[]")
	}
	return &pb.UIState{
		UiSpecJson:         string(s.UISpec),
		MessageHistoryJson: string(s.MessageHistory),
		ToolSchemaJson:     string(s.ToolSchema),
		AllToolsJson:       string(tools),
		HostOnline:         s.HostOnline,
		StudySessionId:     s.ActiveSession,
	}
}
