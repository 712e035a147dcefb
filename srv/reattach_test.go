package srv_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
)

type askResult struct {
	r   *pb.AskQuestionResponse
	err error
}

func askOver(c agentassistprotoconnect.SrvAgentAssistClient, id, dir, question string) chan askResult {
	done := make(chan askResult, 1)
	go func() {
		r, err := c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
			ID: id, UserToken: tokA, Request: &pb.McpAskQuestionRequest{ProjectDirectory: dir, Question: question, Timeout: 60},
		})
		done <- askResult{r, err}
	}()
	return done
}

func wait(t *testing.T, done chan askResult) askResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the call")
	}
	return askResult{}
}

// refusedAsInUse checks a call reusing an id for another request was
// refused as such, not answered.
func refusedAsInUse(t *testing.T, what string, r askResult) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("%s: got someone else's answer %v", what, r.r)
	}
	if connect.CodeOf(r.err) != connect.CodeAlreadyExists || !strings.Contains(r.err.Error(), "in use by a different request") {
		t.Fatalf("%s: %v, want AlreadyExists saying the id is in use by a different request", what, r.err)
	}
}

// TestReattachMustBeTheSameRequest: asking with the id of a pending or
// answered request re-attaches only when it is the same request; another
// question (or project) under that id is refused, never handed the
// answer to a question nobody saw.
func TestReattachMustBeTheSameRequest(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	c := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, base)
	phone := login(t, base, tokA, "phone")

	first := askOver(c, "shared", "/proj", "Deploy to production?")
	if q := expect(t, phone, "AskQuestion"); q.GetAskQuestionRequest().GetRequest().GetQuestion() != "Deploy to production?" {
		t.Fatalf("the phone got %v", q)
	}
	again := askOver(c, "shared", "/proj", "Deploy to production?") // the same call after a lost connection
	other := askOver(c, "shared", "/proj", "Delete the backups?")
	refusedAsInUse(t, "another question on a pending id", wait(t, other))
	elsewhere := askOver(c, "shared", "/elsewhere", "Deploy to production?")
	refusedAsInUse(t, "another project on a pending id", wait(t, elsewhere))

	if err := phone.Send(wstest.TextReply("shared", "yes, deploy")); err != nil {
		t.Fatal(err)
	}
	for _, done := range []chan askResult{first, again} {
		if r := wait(t, done); r.err != nil || r.r.GetContents()[0].GetText().GetText() != "yes, deploy" {
			t.Fatalf("the asker: %v %v", r.r, r.err)
		}
	}

	refusedAsInUse(t, "another question on an answered id", wait(t, askOver(c, "shared", "/proj", "Delete the backups?")))
	if r := wait(t, askOver(c, "shared", "/proj", "Deploy to production?")); r.err != nil || r.r.GetContents()[0].GetText().GetText() != "yes, deploy" {
		t.Fatalf("re-attaching after the answer: %v %v", r.r, r.err)
	}
	if err := phone.Quiet(200 * time.Millisecond); err != nil {
		t.Fatalf("the phone after the refusals: %v", err)
	}
}
