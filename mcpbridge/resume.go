package mcpbridge

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// A call resumed through another server than the one it was made
// through: behind a balancer, a client whose call's stream was cut
// resumes it wherever its next connection lands. The server that serves
// the call chooses the request's ID before it asks (WithRequest) and
// learns what re-attaching to it takes; another server re-attaches with
// that (Server.Resume) and answers the call as the first one would.

// Asked is told what re-attaching to a call's request takes, as the
// call asks: its kind, its digest (wire.Digest of the kind, project
// directory and text) and its timeout.
type Asked func(kind wire.Kind, sum [32]byte, timeout time.Duration)

type requestKey struct{}

type requestOpts struct {
	id    string
	asked Asked
}

// WithRequest gives a tool call served in ctx the ID of the request it
// asks, if it asks one, and asked to tell before it does.
func WithRequest(ctx context.Context, id string, asked Asked) context.Context {
	return context.WithValue(ctx, requestKey{}, requestOpts{id: id, asked: asked})
}

// requestOf is the ID a call's request takes (WithRequest, or a new
// one), and whom to tell that it asks.
func requestOf(ctx context.Context) (string, Asked) {
	if o, ok := ctx.Value(requestKey{}).(requestOpts); ok && o.id != "" {
		return o.id, o.asked
	}
	return wire.NewID(), nil
}

// A Reattacher is a Backend that re-attaches to a request knowing only
// its ID, kind and digest (the server's own, in process): it waits for
// the outcome and gives the request's choices with the answer; NotFound
// when the request is not pending or kept.
type Reattacher interface {
	Reattach(ctx context.Context, kind wire.Kind, id string, sum [32]byte) (resp *pb.AskQuestionResponse, qs []*pb.Question, by string, err error)
}

// Resume waits for the outcome of the request id (of kind, digest sum
// and timeout) that a call of this session asked through another server,
// and gives the call's result as that call would have: the person's
// answer, or what ended the request. As a call does, it waits on the
// server only while its client is connected (WithLink), and takes no
// answer after ctx ends.
func (s *Server) Resume(ctx context.Context, kind wire.Kind, id string, sum [32]byte, timeout time.Duration) *mcp.CallToolResult {
	b := s.b
	r, ok := b.be.(Reattacher)
	if !ok {
		return mcp.NewToolResultError("This call cannot be resumed through this server: call the tool again.")
	}
	var qs []*pb.Question
	res, _ := b.waitFor(ctx, mcp.CallToolRequest{}, kind, id, func() []*pb.Question { return qs }, timeout, func(ctx context.Context) (*pb.AskQuestionResponse, error) {
		resp, got, _, err := r.Reattach(ctx, kind, id, sum)
		if err == nil {
			qs = got
		}
		return resp, err
	})
	return res
}
