//go:build unix

package e2e

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestFaults8PushThroughFaults: three instances on a three-node NATS
// cluster, a device subscribed to push, an agent through
// agentassistant-mcp -server a,b,c, and a phone on /ws answering. Each
// round injects a fault while a question waits: none; the instance that
// asked killed (kill -9) while its push service is busy; the instance
// holding the call paused (SIGSTOP) until the agent moves on, then
// resumed; one NATS node killed and started again. Each question is
// pushed (again, after its instance died or froze, by the one that took
// it over) and its answer reaches the agent, once.
func TestFaults8PushThroughFaults(t *testing.T) {
	dbl := startPushDouble(t)
	ns := startNATSCluster(t, 3)
	config := "[push]\nallow_private_endpoints = true\n"
	var srvs []*server
	list := ""
	for i, name := range []string{"a", "b", "c"} {
		s := startInstanceConfig(t, ns.URLs(), name, config)
		srvs = append(srvs, s)
		if i > 0 {
			list += ","
		}
		list += s.Host + ":" + s.Port
	}
	if code, out := sendSubscription(t, srvs[1], "POST", "/push/subscriptions", pushDevice(t, dbl, "/device")); code != http.StatusCreated {
		t.Fatalf("subscribe: %d %v", code, out)
	}
	// Every push is taken (201), but for the one a round holds.
	var mu sync.Mutex
	pushes := 0
	var hold chan pushed
	more := make(chan struct{}, 64)
	go func() {
		for {
			select {
			case p := <-dbl.came:
				mu.Lock()
				pushes++
				h := hold
				hold = nil
				mu.Unlock()
				if h != nil {
					h <- p
				} else {
					p.answer <- http.StatusCreated
				}
				more <- struct{}{}
			case <-t.Context().Done():
				return
			}
		}
	}()
	pushesNow := func() int { mu.Lock(); defer mu.Unlock(); return pushes }
	// pushedSince waits for a push after the n-th.
	pushedSince := func(n int, what string) {
		t.Helper()
		for pushesNow() <= n {
			select {
			case <-more:
			case <-time.After(45 * time.Second):
				t.Fatalf("%s: no push", what)
			}
		}
	}
	agent := startMCP(t, srvs[0], tokenA, "-server", list)
	phone := dial(t, srvs[2], tokenA, "phone") // on C, which no round faults
	answer := func(q, text string, done chan callResult) {
		t.Helper()
		for {
			m, err := phone.Expect("AskQuestion", 30*time.Second)
			if err != nil {
				t.Fatalf("%s: the phone never had it: %v", q, err)
			}
			if m.GetAskQuestionRequest().GetRequest().GetQuestion() != q {
				continue
			}
			if err := phone.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), text)); err != nil {
				t.Fatal(err)
			}
			break
		}
		wantAnswer(t, done, text)
	}
	rounds, faults := 0, 0

	// No fault.
	n := pushesNow()
	done := askAsync(agent, "Round 1?")
	pushedSince(n, "round 1")
	answer("Round 1?", "One.", done)
	rounds++

	// A, which asks, killed while its push service is busy.
	h := make(chan pushed, 1)
	mu.Lock()
	hold = h
	mu.Unlock()
	done = askAsync(agent, "Round 2?")
	busy := <-h
	n = pushesNow()
	srvs[0].kill9(t)
	faults++
	busy.answer <- http.StatusServiceUnavailable
	pushedSince(n, "round 2, after the asker died")
	answer("Round 2?", "Two.", done)
	rounds++

	// B, which holds the call now, paused until the agent moves on.
	n = pushesNow()
	done = askAsync(agent, "Round 3?")
	pushedSince(n, "round 3")
	n = pushesNow()
	paused := srvs[1].cmd.Process
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	faults++
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })
	pushedSince(n, "round 3, its instance paused") // by C, which took it over
	answer("Round 3?", "Three.", done)
	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	faults++
	rounds++

	// A NATS node killed, and started again.
	ns.kill9(1)
	faults++
	n = pushesNow()
	done = askAsync(agent, "Round 4?")
	pushedSince(n, "round 4")
	answer("Round 4?", "Four.", done)
	ns.start(1)
	faults++
	rounds++
	t.Logf("push through faults: %d questions, each pushed and answered once; %d faults; %d pushes in all", rounds, faults, pushesNow())
}
