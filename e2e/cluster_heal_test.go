package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterSilentLinkCut: instance one's link to NATS goes silent (no
// reset, nothing passes: a partition). One notices by itself: it logs
// that it can save nothing, /health answers 503, and the agent's call
// held there ends as unavailable, so agentassistant-mcp with both
// servers goes to instance two, re-attaches to the same question, and
// gets the answer a device gives there. When the link is back, one says
// so and /health answers 200 again.
func TestClusterSilentLinkCut(t *testing.T) {
	ns := natstest.Start(t)
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", "nats://" + link.Addr(), "-instance", "one"}, tokenA)
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	device := dial(t, two, tokenA, "phone")
	agent := startMCP(t, one, tokenA, "-server", one.Host+":"+one.Port+","+two.Host+":"+two.Port)

	done := askFromProject(agent, "Ship it?", "/p")
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	// The call waits at one once one has its record's save confirmed
	// (counted as asked): two may show the question before that, and a
	// cut before it leaves the call still asking there, not waiting.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metrics(t, one.URL, tokenA), `event="asked"} 1`); {
		if time.Now().After(deadline) {
			t.Fatal("instance one never counted the question asked")
		}
		time.Sleep(10 * time.Millisecond)
	}

	link.SetSilent(true)
	healthIs(t, one, http.StatusServiceUnavailable)
	waitLog(t, one, "NATS does not answer")
	waitLog(t, one, "agent call ended: this instance lost its link to NATS")
	waitLog(t, two, "re-attached to a pending request")

	if err := device.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "Yes, ship it.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Yes, ship it." {
			t.Fatalf("agent got %v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer given on instance two")
	}

	link.SetSilent(false)
	healthIs(t, one, http.StatusOK)
	waitLog(t, one, "NATS answers again")
}

// TestClusterStorageWiped: NATS comes back without its storage (its
// buckets gone). The instance notices, logs what was lost (the question
// pending there), and starts afresh in its own process: the buckets are
// made again, /health is 200, and the agent still waiting asks again, so
// the person sees the question and the agent gets the answer.
//
// A request whose body is still coming when the storage goes (a slow
// client's) keeps the HTTP server from draining within its 5 s: the
// instance starts afresh all the same, rather than exit.
func TestClusterStorageWiped(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, freePort(t), t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	device := dial(t, one, tokenA, "phone")
	agent := startMCP(t, one, tokenA)
	done := askFromProject(agent, "Still there?", "/p")
	must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))

	slow, err := net.Dial("tcp", net.JoinHostPort(one.Host, one.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := fmt.Fprintf(slow, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", net.JoinHostPort(one.Host, one.Port), tokenA); err != nil {
		t.Fatal(err)
	}

	ns.Wipe()
	waitLog(t, one, "NATS lost the cluster's storage", "lost_pending=1")
	waitLog(t, one, "shutting down", "to_start_afresh=true")
	for try := 0; strings.Count(one.logw.String(), `msg="cluster mode"`) < 2; try++ { // the fresh run
		if try == 1500 {
			t.Fatal("the instance never started afresh")
		}
		time.Sleep(20 * time.Millisecond)
	}
	healthIs(t, one, http.StatusOK)
	again := dial(t, one, tokenA, "phone")
	q := must[*pb.WebsocketMessage](t)(again.Expect("AskQuestion", 30*time.Second))
	if q.GetAskQuestionRequest().GetRequest().GetQuestion() != "Still there?" {
		t.Fatalf("question = %v", q)
	}
	if err := again.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "Yes.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Yes." {
			t.Fatalf("agent got %v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer")
	}
}
