//go:build unix

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestFaults9OwedFirstSendFoundByScan: in a cluster of three, ntfy
// answers the instance that asked a question (A) 503 and A is killed
// (kill -9) in its retry wait; the agent (agentassistant-mcp -server
// a,b) re-attaches through B, which takes the request over, tries to
// send the question, is told 503 too and is killed as well. The agent
// reaches no instance now, so none is told the question again: C,
// holding ntfy's lease, finds the first send owed in the cluster's
// notes (a claim whose holder is gone, no note that it was sent) and
// sends it, once; its one-tap answer is taken through C.
func TestFaults9OwedFirstSendFoundByScan(t *testing.T) {
	nt := startNtfy(t)
	downTo := func() (*httptest.Server, chan struct{}) {
		tried := make(chan struct{}, 1)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			select {
			case tried <- struct{}{}:
			default:
			}
			http.Error(w, `{"code":50301,"http":503,"error":"service unavailable"}`, http.StatusServiceUnavailable)
		}))
		t.Cleanup(s.Close)
		return s, tried
	}
	downA, triedA := downTo()
	downB, triedB := downTo()
	ns := natstest.Start(t)
	config := func(url string) string {
		return fmt.Sprintf("[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-owed\"\n", url)
	}
	a := startInstanceConfig(t, ns.URL(), "a", config(downA.URL))
	b := startInstanceConfig(t, ns.URL(), "b", config(downB.URL))
	c := startInstanceConfig(t, ns.URL(), "c", config(nt.URL))
	agent := startMCP(t, a, tokenA, "-server", a.Host+":"+a.Port+","+b.Host+":"+b.Port)
	done := askAsync(agent, "Sent though A and B died?")
	waitTried := func(tried chan struct{}, who string) {
		t.Helper()
		select {
		case <-tried:
		case r := <-done:
			t.Fatalf("the agent's call ended: %+v %v", r.r, r.err)
		case <-time.After(90 * time.Second):
			t.Fatalf("%s never tried to send the question", who)
		}
	}
	waitTried(triedA, "A")
	a.kill9(t)
	waitTried(triedB, "B, which took the request over,")
	b.kill9(t)

	path, body := nt.tapWithin(t, 1, 120*time.Second)
	_, rest, _ := strings.Cut(body, `"text":"`)
	label, _, _ := strings.Cut(rest, `"`)
	if label == "" {
		t.Fatalf("no one-tap label in %s", body)
	}
	if code, said := postTap(t, c, path, body); code != http.StatusOK {
		t.Fatalf("the tap through C: %d %s", code, said)
	}
	// The question's message, then its settled update.
	nt.published(t, 2)
	if n := nt.questions(); n != 1 {
		t.Fatalf("ntfy had %d messages of the question, want 1", n)
	}
	t.Logf("ntfy: asker and taker killed -9 before either sent; the lease holder found the send owed and sent it once")
}
