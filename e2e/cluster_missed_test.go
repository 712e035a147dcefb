package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestClusterAnswerSoonAfterTheAgentLeft: the agent asks through instance
// one and its agentassistant-mcp goes away; once instance one has seen it
// go, well before the screens are told no agent waits, the person answers
// on a device of instance two. The answer is kept all the same: the project's next call,
// through instance one, gets it instead of asking, once.
func TestClusterAnswerSoonAfterTheAgentLeft(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	device := dial(t, two, tokenA, "phone")
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const project = "/p"

	agent := startMCP(t, one, tokenA)
	done := askFromProject(agent, "Which colour?", project)
	id := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest().GetID()
	if err := agent.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	<-done
	// Instance one has seen the call go; the agent-gone notice is seconds
	// away (OrphanNotice).
	waitLog(t, one, `msg="agent call went away"`, "id="+id)
	if err := device.Send(wstest.TextReply(id, "Blue.")); err != nil {
		t.Fatal(err)
	}
	// Instance two wrote the answer as delivered; instance one, the
	// call's holder, marks it undelivered and hears its own mark.
	rev := waitRecord(t, js, id, func(rec store.Record) bool { return rec.ClosedNote == hub.ReasonUndelivered })
	waitHeard(t, one, device.Login.GetEpoch(), rev)

	agent2 := startMCP(t, one, tokenA)
	var r callResult
	select {
	case r = <-askFromProject(agent2, "Which size?", project):
	case <-time.After(30 * time.Second):
		t.Fatal("the next call waits: it was asked instead of getting the kept answer")
	}
	if r.err != nil || r.r.IsError {
		t.Fatalf("result = %+v %v", r.r, r.err)
	}
	got := resultText(r.r)
	for _, want := range []string{"While no agent was waiting for it", "Which colour?", "Blue."} {
		if !strings.Contains(got, want) {
			t.Errorf("result %q lacks %q", got, want)
		}
	}

	// Once: the next call through instance two is asked as usual.
	agent3 := startMCP(t, two, tokenA)
	done = askFromProject(agent3, "Which size?", project)
	m := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	if err := device.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Large.")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || resultText(r.r) != "Large." {
		t.Fatalf("third call = %+v %v", r.r, r.err)
	}
}
