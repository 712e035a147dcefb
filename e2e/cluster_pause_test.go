//go:build unix

package e2e

import (
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterPausedInstance: the instance holding an agent's call is
// paused (SIGSTOP: its kernel keeps the connections, nothing answers).
// The person answers on another instance; agentassistant-mcp notices its
// instance stalled, re-attaches through the next one and gets the answer
// there, while the paused one is still paused.
func TestClusterPausedInstance(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	device := dial(t, two, tokenA, "phone")
	agent := startMCP(t, one, tokenA, "-server", one.Host+":"+one.Port+","+two.Host+":"+two.Port)

	done := askFromProject(agent, "Merge it?", "/p")
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	if err := one.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = one.cmd.Process.Signal(syscall.SIGCONT) }) // so it can stop
	if err := device.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "Merged.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Merged." {
			t.Fatalf("agent got %v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the agent never got the answer given on instance two")
	}
}
