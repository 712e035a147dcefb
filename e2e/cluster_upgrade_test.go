package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterMCPRollingUpgrade crosses the previous release with this one
// in a cluster being upgraded: an instance of each (the previous one's
// agentassistant-srv named by AA_PREVIOUS_SRV, an absolute path, built
// from this repository's history: make previous). An agent's /mcp call
// asks on one; its stream is cut and resumed through the other, which
// carries it and gives event IDs of the carrier's form
// ("<tag>-<n>@<origin tag>-<m>.<claims>"); cut again, it is resumed
// through the first from such an ID. Whichever release the call began
// on, neither resume is refused, and the person's answer is the call's
// response, once.
func TestClusterMCPRollingUpgrade(t *testing.T) {
	previous := os.Getenv("AA_PREVIOUS_SRV")
	if previous == "" {
		t.Skip("AA_PREVIOUS_SRV names no agentassistant-srv of the previous release (make previous builds one)")
	}
	for _, tc := range []struct {
		name string
		old  int // which instance, 0 where the call begins or 1, is of the previous release
	}{{"begun on this release, carried by the previous", 1}, {"begun on the previous release, carried by this", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := natstest.Start(t)
			var srvs []*server
			for i, name := range []string{"a", "b"} {
				bin := filepath.Join(binDir, "agentassistant-srv")
				if i == tc.old {
					bin = previous
				}
				srvs = append(srvs, startServerBin(t, bin, nil, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", name}, tokenA))
			}
			upgradeCrossed(t, srvs[0], srvs[1])
		})
	}
}

// upgradeCrossed asks through origin, resumes through carrier, then
// through origin again from the carrier's event ID.
func upgradeCrossed(t *testing.T, origin, carrier *server) {
	device := dial(t, carrier, tokenA, "phone")
	agent := &rawMCP{t: t, url: origin.URL + "/mcp"}
	agent.initialize()
	resp := agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Upgrade?","project_directory":"/src"}}}`)
	events := bufio.NewReader(resp.Body)
	last := mustEvent(t, events).id
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	last = askedID(t, agent, events, last)
	agent.cut()

	agent.url = carrier.URL + "/mcp"
	events = bufio.NewReader(agent.get(last).Body)
	carried := mustEvent(t, events).id
	if tagOf(carried) == tagOf(last) || !strings.Contains(carried, "@"+tagOf(last)+"-") {
		t.Fatalf("the carrier's first event ID %q names no event of the call's stream (%q)", carried, last)
	}
	agent.cut()

	agent.url = origin.URL + "/mcp"
	events = bufio.NewReader(agent.get(carried).Body) // a 400 fails here
	if err := device.Send(wstest.TextReply(q.GetID(), "Upgrade")); err != nil {
		t.Fatal(err)
	}
	if n := responses(t, events, "Upgrade"); n != 1 {
		t.Fatalf("the call's response came %d times on the stream resumed from the carrier's event ID", n)
	}
}
