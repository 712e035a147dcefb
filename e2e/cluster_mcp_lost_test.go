//go:build unix

package e2e

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
)

// What an /mcp client's cancel or DELETE does when the instance that
// holds the session does not hear of it at the moment it is told: its
// link to NATS cut then, or the process paused.

// lostPair is two instances: one reaches NATS through a link the test
// cuts, two directly.
func lostPair(t *testing.T) (one, two *server, link *faultproxy.Proxy) {
	t.Helper()
	ns := natstest.Start(t)
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	one = startServerWith(t, "0", t.TempDir(), []string{"-nats-url", "nats://" + link.Addr(), "-instance", "one"}, tokenA)
	two = startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	return one, two, link
}

// missWhile makes one miss what is told while do runs: "cut" resets
// one's link to NATS until do is done (shorter than the 4 s after which
// one would end its calls as unreachable), "pause" stops its process.
func missWhile(t *testing.T, how string, one *server, link *faultproxy.Proxy, do func()) {
	t.Helper()
	switch how {
	case "cut":
		link.SetDown(true)
		waitLog(t, one, "NATS disconnected")
		do()
		link.SetDown(false)
		waitLog(t, one, "NATS reconnected")
	case "pause":
		if err := one.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		do()
		if err := one.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterMCPCancelMissed: an agent's call waits on instance one, the
// question on the person's device; the agent's cancel lands on instance
// two while one does not hear it. The question still leaves the device
// once one is back, and the call ends saying it was cancelled, rather
// than the question waiting for its full timeout while the agent
// believes it withdrawn.
func TestClusterMCPCancelMissed(t *testing.T) {
	for _, how := range []string{"cut", "pause"} {
		t.Run(how, func(t *testing.T) {
			one, two, link := lostPair(t)
			device := dial(t, two, tokenA, "phone")
			agent := &rawMCP{t: t, url: one.URL + "/mcp"}
			agent.initialize()
			resp := agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src","timeout":600}}}`)
			response := make(chan string, 1)
			go func() {
				events := bufio.NewReader(resp.Body)
				for {
					ev, err := nextEvent(events)
					if err != nil {
						response <- "the stream ended: " + err.Error()
						return
					}
					if strings.Contains(ev.data, `"id":7`) {
						response <- ev.data
						return
					}
				}
			}()
			q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
			// The call waits at one once its record is saved (counted as
			// asked); a cut before that ends the call as unsaved.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metrics(t, one.URL, tokenA), `event="asked"} 1`); {
				if time.Now().After(deadline) {
					t.Fatal("instance one never counted the question asked")
				}
				time.Sleep(10 * time.Millisecond)
			}
			elsewhere := &rawMCP{t: t, url: two.URL + "/mcp", sid: agent.sid}
			missWhile(t, how, one, link, func() {
				r := elsewhere.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"stopped"}}`)
				_, _ = io.ReadAll(r.Body)
				waitLog(t, two, "told the other instances", "cancel")
			})
			if got := awaitEnd(t, device, q.GetID()); got != "cancelled" {
				t.Fatalf("the question ended with %q on the device, not withdrawn by the cancel", got)
			}
			select {
			case data := <-response:
				if !strings.Contains(data, "The call was cancelled") {
					t.Fatalf("the call's response: %s", data)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the cancelled call never ended")
			}
		})
	}
}

// TestClusterMCPEndMissed: instance one serves an agent's session too
// (adopted); the agent ends it (DELETE) on instance two while one does
// not hear it. Once one is back it refuses the session (404) as two
// does, rather than serving on a session its client ended.
func TestClusterMCPEndMissed(t *testing.T) {
	for _, how := range []string{"cut", "pause"} {
		t.Run(how, func(t *testing.T) {
			one, two, link := lostPair(t)
			agent := &rawMCP{t: t, url: two.URL + "/mcp"}
			agent.initialize()
			if code := mcpStatus(t, one, agent.sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); code != http.StatusOK {
				t.Fatalf("instance one serves the session with %d", code)
			}
			missWhile(t, how, one, link, func() {
				r := agent.do(http.MethodDelete, "", nil)
				_, _ = io.ReadAll(r.Body)
				waitLog(t, two, "told the other instances", "end")
			})
			if code := mcpStatus(t, two, agent.sid, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`); code != http.StatusNotFound {
				t.Fatalf("instance two answers the ended session with %d", code)
			}
			var code int
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if code = mcpStatus(t, one, agent.sid, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`); code == http.StatusNotFound {
					return
				}
			}
			t.Fatalf("instance one still answers the session its client ended on two with %d, not 404", code)
		})
	}
}

// TestClusterMCPEndBeforeStart: an agent ends its session (DELETE) on
// instance one; instance two starts afterwards, never told. Two refuses
// the session (404) from its first request, as one does, rather than
// taking it over.
func TestClusterMCPEndBeforeStart(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	agent := &rawMCP{t: t, url: one.URL + "/mcp"}
	agent.initialize()
	r := agent.do(http.MethodDelete, "", nil)
	_, _ = io.ReadAll(r.Body)
	waitLog(t, one, "told the other instances", "end")
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	if code := mcpStatus(t, two, agent.sid, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`); code != http.StatusNotFound {
		t.Fatalf("instance two, started after the session ended, answers it with %d, not 404", code)
	}
}
