// Package rpc serves the Connect services agents and non-/ws clients call.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/protocount"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Options configure the services.
type Options struct {
	Hub    *hub.Hub
	Relay  *relay.Relay // nil: no SrvUIRelay
	Tokens *auth.Tokens
	// Guard refuses a call that carries an Origin it does not allow (a
	// page of another site), before anything else; nil: the zero Guard
	// (the server's own loopback pages only).
	Guard *auth.Guard
	// Limiter slows down addresses with too many failed calls; nil: none.
	Limiter *auth.Limiter
	// Pending caps the calls whose token is not known yet (no valid
	// header token, the message not read yet), together with the
	// WebSockets that have not logged in; nil: no cap.
	Pending *auth.Pending
	Logger  *slog.Logger
	// DefaultTimeout applies when a request's Timeout is 0 (default 600s).
	DefaultTimeout time.Duration
	// MaxTimeout caps a request's Timeout (default 24h).
	MaxTimeout time.Duration
	// MaxMessage bounds a request message (default 16 MiB).
	MaxMessage int
	// MaxUnauthMessage bounds a request message, compressed or not, of a
	// call without a valid token in its header: the token may be inside
	// the message, and is checked only once it is read (default 64 KiB).
	MaxUnauthMessage int
}

// Services are the Connect services' handlers: mounted on a mux for the
// network (Mount), and called in process by the server's own /mcp
// endpoint (Local).
type Services struct{ s *service }

// New returns the services of o.
func New(o Options) *Services {
	opt.Logger(&o.Logger)
	opt.Default(&o.DefaultTimeout, 600*time.Second)
	opt.Default(&o.MaxTimeout, 24*time.Hour)
	opt.Default(&o.MaxMessage, 16<<20)
	opt.Default(&o.MaxUnauthMessage, 64<<10)
	return &Services{s: &service{o: o}}
}

// Mount registers the Connect services on mux and returns their paths.
func (v *Services) Mount(mux *http.ServeMux) []string {
	o := v.s.o
	a := authInterceptor{tokens: o.Tokens, limiter: o.Limiter}
	common := []connect.HandlerOption{
		connect.WithInterceptors(a),
		// Gzip costs more than it saves on small messages (most are a few
		// hundred bytes, over loopback); replies with images still shrink.
		connect.WithCompressMinBytes(CompressMinBytes),
		// A message's elements counted before it is decoded.
		connect.WithCodec(protocount.Proto{}),
		connect.WithCodec(protocount.JSON{As: "json"}),
		connect.WithCodec(protocount.JSON{As: "json; charset=utf-8"}),
	}
	// See preauth.go: calls with a valid header token, and all the others.
	full := connect.WithHandlerOptions(append(slices.Clip(common),
		connect.WithReadMaxBytes(o.MaxMessage),
		connect.WithCompression("gzip", gzipCapped(o.MaxMessage, fmt.Errorf("message larger than %d bytes once decompressed", o.MaxMessage)), newGzipWriter),
	)...)
	small := connect.WithHandlerOptions(append(slices.Clip(common),
		connect.WithRequestGate(a.gate),
		connect.WithReadMaxBytes(o.MaxUnauthMessage),
		connect.WithCompression("gzip", gzipCapped(o.MaxUnauthMessage, errNeedsHeader(o.MaxUnauthMessage)), newGzipWriter),
	)...)
	s := v.s
	handlers := []func(...connect.HandlerOption) (string, http.Handler){
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return agentassistprotoconnect.NewSrvAgentAssistHandler(s, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return agentassistprotoconnect.NewSrvAgentAssistReplyHandler(replyService{s}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return agentassistprotoconnect.NewSrvAgentAssistControlHandler(controlService{s}, o...)
		},
	}
	if o.Relay != nil {
		handlers = append(handlers, func(o ...connect.HandlerOption) (string, http.Handler) {
			return agentassistprotoconnect.NewSrvUIRelayHandler(uiHandler{v.s.o.Relay}, o...)
		})
	}
	var paths []string
	for _, handler := range handlers {
		path, f := handler(full)
		_, sm := handler(small)
		mux.Handle(path, &preauth{full: f, small: sm, a: a, guard: o.Guard, smallMax: o.MaxUnauthMessage, pending: o.Pending})
		paths = append(paths, path)
	}
	return paths
}

// CompressMinBytes is the smallest response the services gzip.
const CompressMinBytes = 16 << 10

type service struct{ o Options }

// caller is who makes a call: the token checked for it, the door it came
// through, and whether it takes the answers given while it was away.
type caller struct {
	token, door string
	takesMissed bool
}

// DoorConnect is the door of the calls that come over the network.
const DoorConnect = "connect"

// connectCaller is the caller of a Connect call: the interceptor's token
// and the TakesMissedHeader it sent (only "1" says it takes them).
func connectCaller(ctx context.Context) caller {
	c := caller{token: tokenOf(ctx), door: DoorConnect}
	if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && ci.RequestHeader().Get(wire.TakesMissedHeader) == wire.TakesMissedYes {
		c.takesMissed = true
	}
	return c
}

// tellAnsweredBy names, in the Connect response's header, who answered.
func tellAnsweredBy(ctx context.Context, rep *hub.Reply) {
	if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && rep.Nickname != "" {
		ci.ResponseHeader().Set(wire.AnsweredByHeader, wire.EncodeAnsweredBy(rep.Nickname))
	}
}

func (s *service) AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	rep, id, err := s.askQuestion(ctx, connectCaller(ctx), req)
	if err != nil {
		return nil, err
	}
	tellAnsweredBy(ctx, rep)
	return askResponse(id, rep), nil
}

func (s *service) askQuestion(ctx context.Context, c caller, req *pb.AskQuestionRequest) (*hub.Reply, string, error) {
	r := req.GetRequest()
	return s.ask(ctx, c, hub.Request{
		Kind: wire.AskQuestion, ID: req.GetID(), ProjectDirectory: r.GetProjectDirectory(), Text: r.GetQuestion(),
		AgentName: r.GetAgentName(), ReasoningModelName: r.GetReasoningModelName(), McpClientName: r.GetMcpClientName(),
		Questions: r.GetQuestions(),
	}, r.GetTimeout())
}

// TaskFinish is the task report of upstream's older generation, whose
// apps know it by that name only: it is listed to them so.
func (s *service) TaskFinish(ctx context.Context, req *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	r := req.GetRequest()
	rep, id, err := s.ask(ctx, connectCaller(ctx), hub.Request{
		Kind: wire.TaskFinish, ID: req.GetID(), ProjectDirectory: r.GetProjectDirectory(), Text: r.GetSummary(),
		AgentName: r.GetAgentName(), ReasoningModelName: r.GetReasoningModelName(), McpClientName: r.GetMcpClientName(),
		TaskFinishEra: true, Questions: r.GetQuestions(),
	}, r.GetTimeout())
	if err != nil {
		return nil, err
	}
	tellAnsweredBy(ctx, rep)
	return taskResponse(id, rep), nil
}

// WorkReport is TaskFinish under the current upstream generation's name.
func (s *service) WorkReport(ctx context.Context, req *pb.WorkReportRequest) (*pb.WorkReportResponse, error) {
	rep, id, err := s.workReport(ctx, connectCaller(ctx), req.GetID(), req.GetRequest())
	if err != nil {
		return nil, err
	}
	tellAnsweredBy(ctx, rep)
	return &pb.WorkReportResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}, nil
}

func (s *service) workReport(ctx context.Context, c caller, id string, r *pb.McpWorkReportRequest) (*hub.Reply, string, error) {
	return s.ask(ctx, c, hub.Request{
		Kind: wire.TaskFinish, ID: id, ProjectDirectory: r.GetProjectDirectory(), Text: r.GetSummary(),
		AgentName: r.GetAgentName(), ReasoningModelName: r.GetReasoningModelName(), McpClientName: r.GetMcpClientName(),
		Questions: r.GetQuestions(),
	}, r.GetTimeout())
}

// SendMcpClientInfo records which MCP client an agent runs in: in the log,
// since the requests carry its name themselves.
func (s *service) SendMcpClientInfo(ctx context.Context, req *pb.McpClientInfoRequest) (*pb.McpClientInfoResponse, error) {
	d := req.GetRequest()
	s.o.Logger.Info("MCP client", "name", clip(d.GetClientName()), "version", clip(d.GetClientVersion()),
		"protocol", clip(d.GetProtocolVersion()))
	return &pb.McpClientInfoResponse{Success: true}, nil
}

const (
	maxIDLen   = 128
	maxNameLen = 128 // agent, model and MCP client names
)

// clip makes a name one line of text (without control characters, line
// or paragraph separators, or bidirectional controls, which would make it
// read as something else) and shortens it to maxNameLen bytes, on a
// character boundary.
func clip(s string) string {
	s = wire.OneLine(s)
	if len(s) <= maxNameLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxNameLen], "")
}

// ask is every question and task report of the services: it checks req
// (its options, its text, its ID), gives it its ID and timeout when the
// caller gave none, and waits in the hub for the outcome, a hub error
// mapped to its Connect code (askError). The ID returned is the
// request's, made here when the caller gave none.
func (s *service) ask(ctx context.Context, c caller, req hub.Request, timeoutSec int32) (*hub.Reply, string, error) {
	kind, id := req.Kind, req.ID
	if strings.TrimSpace(req.Text) == "" && len(req.Questions) > 0 {
		// The current upstream generation asks in Questions alone.
		req.Text = req.Questions[0].GetQuestion()
	}
	if err := wire.CheckQuestions(req.Questions); err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the Questions field: %w", err))
	}
	req.Text, req.Questions = wire.Fold(req.Text, req.Questions)
	if strings.TrimSpace(req.Text) == "" {
		what := "Question"
		if kind == wire.TaskFinish {
			what = "Summary"
		}
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is empty", what))
	}
	if len(id) > maxIDLen {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ID longer than %d bytes", maxIDLen))
	}
	if id == "" {
		id = wire.NewID()
	}
	timeout := time.Duration(timeoutSec) * time.Second
	opt.Default(&timeout, s.o.DefaultTimeout)
	timeout = min(timeout, s.o.MaxTimeout)
	req.ID, req.Timeout = id, timeout
	req.AgentName, req.ReasoningModelName, req.McpClientName = clip(req.AgentName), clip(req.ReasoningModelName), clip(req.McpClientName)
	// A caller that does not say it takes missed answers (upstream's
	// agentassistant-mcp) never learns of one: its request goes with it.
	req.WithdrawOnLeave = !c.takesMissed
	req.Door = c.door
	rep, err := s.o.Hub.Ask(ctx, c.token, req)
	if err != nil {
		return nil, "", askError(err, id, fmt.Sprintf("no reply within %s; the request was withdrawn", timeout))
	}
	return rep, id, nil
}

// askError is the Connect error of an Ask or Reattach that failed with
// err; timedOut says a timeout.
func askError(err error, id, timedOut string) error {
	switch {
	case errors.Is(err, hub.ErrTimeout):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New(timedOut))
	case errors.Is(err, hub.ErrUnknown):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("request %s: %w", id, err))
	case errors.Is(err, hub.ErrDuplicate):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("request %s: %w", id, err))
	case errors.Is(err, hub.ErrWithdrawn):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, hub.ErrHandedOver):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, hub.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, hub.ErrUnreachable):
		// The cluster's NATS is away: the bridge tries again (or the next
		// instance) until the request's deadline.
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, hub.ErrNotSaved):
		// Not retried by the bridge: the agent hears it at once.
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, hub.ErrPendingBytes):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w; answer or cancel some first, or raise [requests] max_pending_bytes_per_token", err))
	case errors.Is(err, hub.ErrTooManyPending):
		// Not retried either: another try meets the same bound until
		// the person answers.
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w; answer or cancel some first, or raise [requests] max_pending_per_token", err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// replyService answers requests for clients that are not on /ws.
type replyService struct{ s *service }

func (r replyService) AskQuestionReply(ctx context.Context, req *pb.AskQuestionReplyRequest) (*pb.MsgEmpty, error) {
	resp := req.GetResponse()
	return r.answer(ctx, connectCaller(ctx), wire.AskQuestion, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
}

func (r replyService) TaskFinishReply(ctx context.Context, req *pb.TaskFinishReplyRequest) (*pb.MsgEmpty, error) {
	resp := req.GetResponse()
	return r.answer(ctx, connectCaller(ctx), wire.TaskFinish, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
}

// answer puts in the answer of nick (a name of one line; "rpc" when
// none) to the request id of kind, from a caller that is not on /ws;
// the first answer wins.
func (r replyService) answer(ctx context.Context, c caller, kind wire.Kind, id, nick string, isErr bool, meta map[string]string, contents []*pb.McpResultContent) (*pb.MsgEmpty, error) {
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("Response.ID is empty"))
	}
	if nick = clip(nick); nick == "" {
		nick = "rpc"
	}
	err := r.s.o.Hub.Answer(ctx, c.token, kind, id, hub.Reply{
		IsError: isErr, Meta: meta, Contents: contents, ClientID: "rpc:" + nick, Nickname: nick, Door: c.door,
	})
	if errors.Is(err, hub.ErrUnreachable) {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	if errors.Is(err, hub.ErrNotSaved) {
		return nil, connect.NewError(connect.CodeResourceExhausted, err)
	}
	if errors.Is(err, hub.ErrNotAnOption) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request %s: %w", id, err))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("request %s: %w", id, err))
	}
	return &pb.MsgEmpty{}, nil
}

// controlService withdraws requests at the agent's wish.
type controlService struct{ s *service }

func (c controlService) CancelRequest(ctx context.Context, req *pb.CancelRequestRequest) (*pb.MsgEmpty, error) {
	return c.cancel(ctx, tokenOf(ctx), req)
}

func (c controlService) cancel(ctx context.Context, token string, req *pb.CancelRequestRequest) (*pb.MsgEmpty, error) {
	if err := c.s.o.Hub.Cancel(ctx, token, req.GetID()); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("request %s: %w", req.GetID(), err))
	}
	return &pb.MsgEmpty{}, nil
}

// Bounds of a TakeMissedAnswers call: answers per response (each may hold
// images), request IDs to leave alone.
const (
	maxMissedPerCall = 8
	maxExceptIDs     = 256
)

func (c controlService) TakeMissedAnswers(ctx context.Context, req *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return c.takeMissed(tokenOf(ctx), req)
}

func (c controlService) takeMissed(token string, req *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	if len(req.GetExceptIds()) > maxExceptIDs {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("more than %d except_ids", maxExceptIDs))
	}
	ms := c.s.o.Hub.TakeMissed(token, req.GetProjectDirectory(), req.GetExceptIds(), maxMissedPerCall)
	out := &pb.TakeMissedAnswersResponse{Answers: make([]*pb.MissedAnswer, len(ms))}
	for i, m := range ms {
		out.Answers[i] = &pb.MissedAnswer{
			MessageType: m.Kind.String(), ID: m.ID, Text: m.Text,
			CreatedAt: m.CreatedAt.UnixMilli(), AnsweredAt: m.AnsweredAt.UnixMilli(),
			Response: askResponse(m.ID, m.Reply), AnsweredBy: m.Reply.Nickname,
		}
	}
	return out, nil
}

// askResponse is rep in its AskQuestion wire form.
func askResponse(id string, rep *hub.Reply) *pb.AskQuestionResponse {
	return &pb.AskQuestionResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}
}

// taskResponse is rep in its TaskFinish wire form.
func taskResponse(id string, rep *hub.Reply) *pb.TaskFinishResponse {
	return &pb.TaskFinishResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}
}
