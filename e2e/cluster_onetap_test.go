//go:build unix

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// tap is the n-th (from 1) question's one-tap answer published to the
// ntfy double (the updates of a settled question carry none): the path
// it POSTs to and its body.
func (d *ntfyDouble) tap(t *testing.T, n int) (path, body string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		d.mu.Lock()
		seen := 0
		for _, m := range d.msgs {
			acts, _ := m["actions"].([]any)
			for _, a := range acts {
				a := a.(map[string]any)
				if a["action"] != "http" {
					continue
				}
				if seen++; seen == n {
					d.mu.Unlock()
					u, err := url.Parse(a["url"].(string))
					if err != nil {
						t.Fatal(err)
					}
					return u.Path, a["body"].(string)
				}
				break
			}
		}
		d.mu.Unlock()
		select {
		case <-d.more:
		case <-deadline:
			t.Fatalf("question %d's one-tap answer was never published to ntfy (%d were)", n, seen)
		}
	}
}

// postTap POSTs a one-tap answer to s: its status and what it said.
func postTap(t *testing.T, s *server, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestClusterOneTapAcrossInstances: a notification's one-tap answer
// (a capability of srv/answercap, made by the instance that asked) for
// a question asked through agentassistant-mcp -server a,b,c:
//   - tapped through B while A, where the agent asked, is dead (kill -9);
//   - tapped through B and C at the same moment: exactly one is taken,
//     the other refused, and the agent has the one taken (20 trials);
//   - tapped through C while B, where the agent waits now, is paused
//     (SIGSTOP).
//
// Each time the agent has the tapped answer, once.
func TestClusterOneTapAcrossInstances(t *testing.T) {
	nt := startNtfy(t)
	ns := natstest.Start(t)
	config := fmt.Sprintf("[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-cluster\"\n", nt.URL)
	var srvs []*server
	var list []string
	for _, name := range []string{"a", "b", "c"} {
		s := startInstanceConfig(t, ns.URL(), name, config)
		srvs = append(srvs, s)
		list = append(list, s.Host+":"+s.Port)
	}
	agent := startMCP(t, srvs[0], tokenA, "-server", strings.Join(list, ","))
	published := 0
	ask := func(q string) (chan callResult, string, string) {
		done := askAsync(agent, q)
		published++
		path, body := nt.tap(t, published)
		return done, path, body
	}
	label := func(body string) string {
		_, rest, _ := strings.Cut(body, `"text":"`)
		text, _, _ := strings.Cut(rest, `"`)
		return text
	}

	// A dead.
	done, path, body := ask("Tapped while A is dead?")
	srvs[0].kill9(t)
	if code, said := postTap(t, srvs[1], path, body); code != http.StatusOK {
		t.Fatalf("the tap through B with A dead: %d %s", code, said)
	}
	wantAnswer(t, done, label(body))

	// Two taps at once through two instances.
	refusals := map[int]int{}
	for i := range 20 {
		done, path, body := ask(fmt.Sprint("Tapped twice at once, ", i, "?"))
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for j, s := range []*server{srvs[1], srvs[2]} {
			wg.Go(func() { codes[j], _ = postTap(t, s, path, body) })
		}
		wg.Wait()
		won := 0
		for _, c := range codes {
			if c == http.StatusOK {
				won++
			} else {
				refusals[c]++
			}
		}
		if won != 1 {
			t.Fatalf("trial %d: taps through B and C answered %v, want exactly one 200", i, codes)
		}
		wantAnswer(t, done, label(body))
	}

	// B, where the agent's calls went after A, paused.
	done, path, body = ask("Tapped while B is paused?")
	paused := srvs[1].cmd.Process
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })
	if code, said := postTap(t, srvs[2], path, body); code != http.StatusOK {
		t.Fatalf("the tap through C with B paused: %d %s", code, said)
	}
	wantAnswer(t, done, label(body))
	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("one-tap: 22 questions, 22 answered once; the second of two taps at once refused with %v", refusals)
}

// TestClusterOneTapTakerKilled: an instance takes a one-tap answer (it
// claims the capability in the cluster) and is killed (kill -9) before
// it saves the answer; the person's app, without a response, taps again
// through another instance. The capability was used for nothing: the
// second tap answers, and the agent has it, rather than the person
// being told the button can no longer answer while the question waits.
func TestClusterOneTapTakerKilled(t *testing.T) {
	nt := startNtfy(t)
	ns := natstest.Start(t)
	config := fmt.Sprintf("[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-cluster\"\n", nt.URL)
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	taker := startInstanceConfig(t, "nats://"+link.Addr(), "b", config)
	asker := startInstanceConfig(t, ns.URL(), "c", config)
	js := jetStreamAt(t, ns.URL())

	done := make(chan *pb.AskQuestionResponse, 1)
	go func() {
		r, err := connectAsk(context.Background(), asker, "tap-1", "Tapped as its taker dies?")
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		done <- r
	}()
	path, body := nt.tap(t, 1)
	// The taker's link to NATS slow (1 s each way): its claim is in
	// NATS a second before it hears so, and its answer would be saved a
	// second after that.
	link.SetDelay(time.Second)
	go func() { _, _ = http.Post(taker.URL+path, "application/json", bytes.NewReader([]byte(body))) }()
	watchBucket(t, js, srvcluster.ClaimsBucket, func([]byte) bool { return true })
	taker.kill9(t)

	// Tapped again, as the person is told to while the claim is young
	// ("try again"), until it is taken or refused.
	var code int
	var said string
	tries := 0
	for try := time.Now(); ; tries++ {
		if code, said = postTap(t, asker, path, body); code != http.StatusServiceUnavailable || time.Since(try) > 30*time.Second {
			break
		}
		time.Sleep(500 * time.Millisecond) // a person tapping again
	}
	if code != http.StatusOK {
		t.Fatalf("the tap again through another instance: %d %s", code, said)
	}
	t.Logf("the tap again answered after %d taps told to try again", tries)
	select {
	case r := <-done:
		_, rest, _ := strings.Cut(body, `"text":"`)
		want, _, _ := strings.Cut(rest, `"`)
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != want {
			t.Fatalf("the agent got %v, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the tap")
	}
	if code, said := postTap(t, asker, path, body); code == http.StatusOK {
		t.Errorf("the same tap once more: %d %s", code, said)
	}
}
