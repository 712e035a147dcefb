package mcpbridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// inProcess is a Backend in the server's process whose every question
// ends with err. The other calls are not made here.
type inProcess struct {
	Backend
	err  error
	asks int
}

func (p *inProcess) TakeMissedAnswers(context.Context, *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return &pb.TakeMissedAnswersResponse{}, nil
}

func (p *inProcess) AskQuestion(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	p.asks++
	return nil, "", p.err
}

// TestInProcessErrorsAreTheServers: an error of a Backend in process is
// the server's own, never a broken link's. A Canceled carries no
// response header there, as one a Connect client makes of a reset link
// does, yet it is a withdrawal: told at once, not asked again; an
// Unavailable (the server shutting down) is asked again every second until
// the request's deadline, as over Connect.
func TestInProcessErrorsAreTheServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		asks  int
		wants string
	}{
		{"withdrawn", connect.NewError(connect.CodeCanceled, errors.New("withdrawn")), 1, "withdrawn before anyone answered"},
		{"refused", connect.NewError(connect.CodeInvalidArgument, errors.New("Question is empty")), 1, "refused the question: Question is empty"},
		{"closing", connect.NewError(connect.CodeUnavailable, errors.New("closed")), 61, "Lost agentassistant-srv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				be := &inProcess{err: tc.err}
				res := askShipIt(t, be)
				if got := text(res); !res.IsError || !strings.Contains(got, tc.wants) {
					t.Errorf("result %q, want an error saying %q", got, tc.wants)
				}
				if be.asks != tc.asks {
					t.Errorf("asked %d times, want %d", be.asks, tc.asks)
				}
			})
		})
	}
}
