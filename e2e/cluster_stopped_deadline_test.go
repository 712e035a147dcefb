//go:build unix

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterDeadlinePassesWhileHolderStopped: the instance holding the
// agent's call is paused (SIGSTOP) across the question's deadline. The
// others time the question out by themselves (the devices are told),
// an answer given after is refused, and once the paused instance goes
// on, the agent is told of the timeout and nothing is settled twice.
func TestClusterDeadlinePassesWhileHolderStopped(t *testing.T) {
	c := startCluster(t)
	two := dial(t, c.srvs[1], tokenA, "two")
	three := dial(t, c.srvs[2], tokenA, "three")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := askClient(c.srvs[0]).AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: "stopped-deadline", UserToken: tokenA,
			Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src", Question: "Soon?", Timeout: 2}})
		done <- res{r, err}
	}()
	must[*pb.WebsocketMessage](t)(two.Expect("AskQuestion", 10*time.Second))
	must[*pb.WebsocketMessage](t)(three.Expect("AskQuestion", 10*time.Second))
	if err := c.srvs[0].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.srvs[0].cmd.Process.Signal(syscall.SIGCONT) })
	ended := func(d *wstest.Client) string {
		for {
			m, err := d.Next(15 * time.Second)
			if err != nil {
				t.Fatalf("the question never ended on a running instance: %v", err)
			}
			if n := m.GetRequestCancelledNotification(); m.Cmd == "RequestCancelled" && n.GetRequestId() == "stopped-deadline" {
				return n.GetReason()
			}
		}
	}
	if r := ended(two); !strings.Contains(r, "timeout") {
		t.Errorf("device two: ended as %q", r)
	}
	if r := ended(three); !strings.Contains(r, "timeout") {
		t.Errorf("device three: ended as %q", r)
	}
	if err := two.Send(wstest.TextReply("stopped-deadline", "Late.")); err != nil {
		t.Fatal(err)
	}
	if e := must[*pb.WebsocketMessage](t)(two.Expect("Error", 10*time.Second)).GetError(); e.GetCode() != "not_pending" {
		t.Errorf("late answer: %v", e)
	}
	if err := c.srvs[0].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err == nil && !r.r.GetIsError() {
			t.Fatalf("the agent got %v, want the timeout", r.r)
		}
		t.Logf("agent: %v %v", r.r.GetContents(), r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's call never ended")
	}
	// Nothing more about it reaches the devices (a second settlement
	// would be told).
	for _, d := range []*wstest.Client{two, three} {
		for {
			m, err := d.Next(2 * time.Second)
			if err != nil {
				break
			}
			if m.GetRequestCancelledNotification().GetRequestId() == "stopped-deadline" || m.GetAskQuestionRequest().GetID() == "stopped-deadline" {
				t.Errorf("after the paused instance went on: %s %v", m.Cmd, m)
			}
		}
	}
}
