//go:build unix

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFaults8OneTapAcrossQuorumLoss: a notification's one-tap answer is
// tapped through B while the NATS cluster (three nats-server processes)
// has lost its quorum (two nodes killed -9), then, once they are back,
// tapped again as the person is told to. The tap in the outage must not
// use the capability up nor be taken without reaching the agent: it is
// told to try again (503); the tap after is taken, the agent (through
// agentassistant-mcp -server a,b) has the answer once, and a third tap
// is refused.
func TestFaults8OneTapAcrossQuorumLoss(t *testing.T) {
	nt := startNtfy(t)
	ns := startNATSCluster(t, 3)
	config := fmt.Sprintf("[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-faults8\"\n", nt.URL)
	a := startInstanceConfig(t, ns.URLs(), "a", config)
	b := startInstanceConfig(t, ns.URLs(), "b", config)
	agent := startMCP(t, a, tokenA, "-server", a.Host+":"+a.Port+","+b.Host+":"+b.Port)

	done := askAsync(agent, "Tapped across a lost quorum?")
	path, body := nt.tap(t, 1)
	_, rest, _ := strings.Cut(body, `"text":"`)
	label, _, _ := strings.Cut(rest, `"`)

	ns.kill9(1)
	ns.kill9(2)
	healthIs(t, b, http.StatusServiceUnavailable)
	code, said := postTap(t, b, path, body)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("the tap without a quorum: %d %s, want 503 (try again)", code, said)
	}
	ns.start(1)
	ns.start(2)
	healthIs(t, b, http.StatusOK)

	tries := 0
	for {
		code, said = postTap(t, b, path, body)
		tries++
		if code != http.StatusServiceUnavailable || tries == 120 {
			break
		}
		time.Sleep(500 * time.Millisecond) // a person tapping again
	}
	if code != http.StatusOK {
		t.Fatalf("the tap once the quorum was back (try %d): %d %s", tries, code, said)
	}
	wantAnswer(t, done, label)
	if code, said := postTap(t, b, path, body); code == http.StatusOK {
		t.Errorf("the same tap once more: %d %s", code, said)
	}
	t.Logf("one-tap across a lost quorum: 1 question, 1 tap refused 503 in the outage, answered at tap %d after, once", tries)
}
