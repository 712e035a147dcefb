// Package rpc serves the Connect services agents and non-/ws clients call.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Options configure the services.
type Options struct {
	Hub    *hub.Hub
	Relay  *relay.Relay // nil: no SrvUIRelay
	Tokens *auth.Tokens
	// Limiter refuses addresses with too many failed calls; nil: none.
	Limiter *auth.Limiter
	Logger  *slog.Logger
	// DefaultTimeout applies when a request's Timeout is 0 (default 600s).
	DefaultTimeout time.Duration
	// MaxTimeout caps a request's Timeout (default 24h).
	MaxTimeout time.Duration
	// MaxMessage bounds a request message (default 16 MiB).
	MaxMessage int
}

// Mount registers the Connect services on mux and returns their paths.
func Mount(mux *http.ServeMux, o Options) []string {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 600 * time.Second
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = 24 * time.Hour
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 16 << 20
	}
	opts := []connect.HandlerOption{
		connect.WithInterceptors(authInterceptor{tokens: o.Tokens, limiter: o.Limiter}),
		connect.WithReadMaxBytes(o.MaxMessage),
		// Gzip costs more than it saves on small messages (most are a few
		// hundred bytes, over loopback); replies with images still shrink.
		connect.WithCompressMinBytes(CompressMinBytes),
	}
	s := &service{o: o}
	var paths []string
	mount := func(path string, h http.Handler) {
		mux.Handle(path, h)
		paths = append(paths, path)
	}
	mount(agentassistprotoconnect.NewSrvAgentAssistHandler(s, opts...))
	mount(agentassistprotoconnect.NewSrvAgentAssistReplyHandler(replyService{s}, opts...))
	mount(agentassistprotoconnect.NewSrvAgentAssistControlHandler(controlService{s}, opts...))
	if o.Relay != nil {
		mount(agentassistprotoconnect.NewSrvUIRelayHandler(uiRelay{o.Relay}, opts...))
	}
	return paths
}

// CompressMinBytes is the smallest response the services gzip.
const CompressMinBytes = 16 << 10

type service struct{ o Options }

func (s *service) AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	r := req.GetRequest()
	rep, id, err := s.ask(ctx, hub.AskQuestion, req.GetID(), r.GetProjectDirectory(), r.GetQuestion(), r.GetTimeout())
	if err != nil {
		return nil, err
	}
	return hub.AskResponse(id, rep), nil
}

func (s *service) TaskFinish(ctx context.Context, req *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	r := req.GetRequest()
	rep, id, err := s.ask(ctx, hub.TaskFinish, req.GetID(), r.GetProjectDirectory(), r.GetSummary(), r.GetTimeout())
	if err != nil {
		return nil, err
	}
	return hub.TaskResponse(id, rep), nil
}

const maxIDLen = 128

func (s *service) ask(ctx context.Context, kind hub.Kind, id, dir, text string, timeoutSec int32) (*hub.Reply, string, error) {
	if strings.TrimSpace(text) == "" {
		what := "Question"
		if kind == hub.TaskFinish {
			what = "Summary"
		}
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is empty", what))
	}
	if len(id) > maxIDLen {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ID longer than %d bytes", maxIDLen))
	}
	if id == "" {
		id = hub.NewID()
	}
	timeout := time.Duration(timeoutSec) * time.Second
	if timeout <= 0 {
		timeout = s.o.DefaultTimeout
	}
	timeout = min(timeout, s.o.MaxTimeout)
	rep, err := s.o.Hub.Ask(ctx, tokenOf(ctx), hub.Request{
		Kind: kind, ID: id, ProjectDirectory: dir, Text: text, Timeout: timeout,
	})
	switch {
	case err == nil:
		return rep, id, nil
	case errors.Is(err, hub.ErrTimeout):
		return nil, "", connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("no reply within %s; the request was withdrawn", timeout))
	case errors.Is(err, hub.ErrDuplicate):
		return nil, "", connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("request %s: %w", id, err))
	case errors.Is(err, hub.ErrWithdrawn):
		return nil, "", connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, hub.ErrClosed):
		return nil, "", connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, hub.ErrNotSaved):
		// Not retried by the bridge: the agent hears it at once.
		return nil, "", connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, "", connect.NewError(connect.CodeCanceled, err)
	}
	return nil, "", connect.NewError(connect.CodeInternal, err)
}

// replyService answers requests for clients that are not on /ws.
type replyService struct{ s *service }

func (r replyService) AskQuestionReply(ctx context.Context, req *pb.AskQuestionReplyRequest) (*pb.MsgEmpty, error) {
	resp := req.GetResponse()
	return r.answer(ctx, hub.AskQuestion, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
}

func (r replyService) TaskFinishReply(ctx context.Context, req *pb.TaskFinishReplyRequest) (*pb.MsgEmpty, error) {
	resp := req.GetResponse()
	return r.answer(ctx, hub.TaskFinish, resp.GetID(), req.GetNickname(), resp.GetIsError(), resp.GetMeta(), resp.GetContents())
}

func (r replyService) answer(ctx context.Context, kind hub.Kind, id, nick string, isErr bool, meta map[string]string, contents []*pb.McpResultContent) (*pb.MsgEmpty, error) {
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("Response.ID is empty"))
	}
	if nick == "" {
		nick = "rpc"
	}
	err := r.s.o.Hub.Answer(tokenOf(ctx), kind, id, hub.Reply{
		IsError: isErr, Meta: meta, Contents: contents, ClientID: "rpc:" + nick, Nickname: nick,
	})
	if errors.Is(err, hub.ErrNotSaved) {
		return nil, connect.NewError(connect.CodeResourceExhausted, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("request %s: %w", id, err))
	}
	return &pb.MsgEmpty{}, nil
}

// controlService withdraws requests at the agent's wish.
type controlService struct{ s *service }

func (c controlService) CancelRequest(ctx context.Context, req *pb.CancelRequestRequest) (*pb.MsgEmpty, error) {
	if err := c.s.o.Hub.Cancel(tokenOf(ctx), req.GetID()); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("request %s: %w", req.GetID(), err))
	}
	return &pb.MsgEmpty{}, nil
}
