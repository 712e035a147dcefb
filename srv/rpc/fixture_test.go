package rpc_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// Two rooms: a call acts in the room of the token it presents.
const (
	tokA = "token-of-room-a"
	tokB = "token-of-room-b"
)

// peer is the remote address the server sees of every pipe connection:
// the one address all of a test's calls share.
const peer = "pipe"

// baseURL names a loopback host, as agentassistant-mcp's does; the
// connection itself is a pipe.
const baseURL = "http://127.0.0.1"

// setup says how to start a fixture; its zero value is a server of the
// two rooms with a fresh hub and no limits.
type setup struct {
	rpc rpc.Options // Hub and Tokens are filled in when nil
	hub hub.Options // for the fresh hub
}

// fixture is the Connect services on an in-memory network, with a client
// of each and the hub's events as they happen.
type fixture struct {
	hub  *hub.Hub
	http *http.Client
	// services are the same handlers, for calls in process (Local).
	services *rpc.Services
	agent    agentassistprotoconnect.SrvAgentAssistClient
	reply    agentassistprotoconnect.SrvAgentAssistReplyClient
	control  agentassistprotoconnect.SrvAgentAssistControlClient
	events   chan hub.Event
}

func start(t *testing.T, s setup, opts ...connect.ClientOption) *fixture {
	t.Helper()
	o := s.rpc
	if o.Hub == nil {
		o.Hub = hub.New(s.hub)
		t.Cleanup(o.Hub.Close) // last: the server below is closed first
	}
	if o.Tokens == nil {
		tokens, err := auth.NewTokens(tokA, tokB)
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = tokens
	}
	f := &fixture{hub: o.Hub, events: make(chan hub.Event, 256)}
	// A subscriber must not block: the buffer holds more than any test
	// makes happen.
	t.Cleanup(o.Hub.Subscribe(func(e hub.Event) {
		select {
		case f.events <- e:
		default:
		}
	}))

	mux := http.NewServeMux()
	f.services = rpc.New(o)
	f.services.Mount(mux)
	l := pipenet.New()
	hs := &http.Server{Handler: mux}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(l)
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
	})

	tr := &http.Transport{DialContext: l.Dial}
	t.Cleanup(tr.CloseIdleConnections) // first: the server closes after
	f.http = &http.Client{Transport: tr}
	f.agent = agentassistprotoconnect.NewSrvAgentAssistClient(f.http, baseURL, opts...)
	f.reply = agentassistprotoconnect.NewSrvAgentAssistReplyClient(f.http, baseURL, opts...)
	f.control = agentassistprotoconnect.NewSrvAgentAssistControlClient(f.http, baseURL, opts...)
	return f
}

// headers returns ctx carrying the request headers kv (name, value, ...)
// and the call's info, whose ResponseHeader is read after the call.
func headers(ctx context.Context, kv ...string) (context.Context, connect.CallInfo) {
	ctx, info := connect.NewClientContext(ctx)
	for i := 0; i+1 < len(kv); i += 2 {
		info.RequestHeader().Add(kv[i], kv[i+1])
	}
	return ctx, info
}

// question is an AskQuestion of room A.
func question(id, text string, timeout int32) *pb.AskQuestionRequest {
	return &pb.AskQuestionRequest{ID: id, UserToken: tokA, Request: &pb.McpAskQuestionRequest{
		ProjectDirectory: "/src/app", Question: text, Timeout: timeout,
	}}
}

// askAsync makes the call on a goroutine of its own, which ends with it;
// the channel gets its outcome.
func (f *fixture) askAsync(ctx context.Context, req *pb.AskQuestionRequest) <-chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := f.agent.AskQuestion(ctx, req)
		out <- result{resp, err}
	}()
	return out
}

type result struct {
	resp *pb.AskQuestionResponse
	err  error
}

// answer answers question id of room A with text, as device nick.
func (f *fixture) answer(ctx context.Context, id, nick, text string) error {
	_, err := f.reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: tokA, Nickname: nick,
		Response: &pb.AskQuestionResponse{ID: id, Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: text}},
		}}})
	return err
}

// next is the next event the hub told, which a settled bubble
// (synctest.Wait) has already delivered.
func (f *fixture) next(t *testing.T) hub.Event {
	t.Helper()
	select {
	case e := <-f.events:
		return e
	default:
		t.Fatal("no event")
		return hub.Event{}
	}
}

// codeOf names the outcome of a call: "ok", or its Connect code.
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}
