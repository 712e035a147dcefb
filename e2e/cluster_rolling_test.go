//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestClusterRollingRestart: three instances on one NATS, restarted one
// after another the hard way (kill -9, a second down, then started again on
// their port, data and name), while an agent asks a question every 200 ms through
// agentassistant-mcp -server a,b,c and a device, through the balancer,
// answers each. Every question ends: answered with the device's answer,
// or the agent told in words why not; none is answered twice
// differently, and none waits past its timeout.
func TestClusterRollingRestart(t *testing.T) {
	ns := natstest.Start(t)
	s := newSoak(t)
	start := func(i int) {
		s.srvs[i] = startServerWith(t, s.ports[i], s.datas[i], []string{"-nats-url", ns.URL(), "-instance", fmt.Sprint("r", i)}, tokenA)
	}
	s.cluster(start)

	l := s.load()
	l.goDevice(func(ctx context.Context) { s.device(ctx, "phone") })
	defer l.stopDevices()

	host, port, _ := net.SplitHostPort(s.addr(0))
	agent := startMCP(t, &server{Host: host, Port: port}, tokenA, "-server", s.serverList())

	// The agent: a question every 200 ms, each its own call, until the
	// restarts are over.
	actx, astop := context.WithCancel(context.Background())
	var calls sync.WaitGroup
	asked := 0
	var ask sync.WaitGroup
	ask.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-actx.Done():
				return
			case <-tick.C:
			}
			asked++
			q := fmt.Sprintf("roll-%d", n)
			from := time.Since(s.start)
			calls.Go(func() {
				cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				r, err := callTool(cctx, agent, "ask_question", map[string]any{"question": q, "timeout": 60})
				c := soakCall{q: q, from: from, took: time.Since(s.start) - from}
				if err != nil {
					c.err = err.Error()
				} else {
					c.got, c.isErr = resultText(r), r.IsError
				}
				s.mu.Lock()
				s.calls = append(s.calls, c)
				s.mu.Unlock()
			})
		}
	})

	time.Sleep(3 * time.Second) // a baseline of asks before the first restart
	for i := range 3 {
		s.srvs[i].kill9(t)
		s.note("instance %d killed -9", i)
		time.Sleep(time.Second) // down for a moment, as a supervisor restarts it
		start(i)
		s.note("instance %d back", i)
		time.Sleep(3 * time.Second)
	}
	astop()
	ask.Wait()
	calls.Wait()
	s.note("every call ended")

	s.mu.Lock()
	defer s.mu.Unlock()
	var answered, told, lost int
	var longest time.Duration
	for _, c := range s.calls {
		longest = max(longest, c.took)
		switch {
		case c.err == "" && !c.isErr && strings.HasPrefix(c.got, "A|"+c.q+"|"):
			answered++
		case c.err == "" && c.isErr && c.got != "":
			told++
			t.Logf("%s (asked at %s): told %q", c.q, c.from.Round(100*time.Millisecond), c.got)
		default:
			lost++
			t.Errorf("%s (asked at %s, took %s): err=%q isErr=%v got=%q", c.q, c.from.Round(100*time.Millisecond), c.took.Round(time.Millisecond), c.err, c.isErr, c.got)
		}
	}
	doubled := 0
	agentGot := map[string]string{}
	for _, c := range s.calls {
		agentGot[c.q] = c.got
	}
	for id, w := range s.winners {
		if len(w) > 1 {
			doubled++
			t.Errorf("question %s (%s): the device was told of %d winners: %v", id, s.qtext[id], len(w), w)
		}
		for a := range w {
			if g, ok := agentGot[s.qtext[id]]; ok && g != a {
				doubled++
				t.Errorf("question %s: the device was told %q won, the agent got %q", s.qtext[id], a, g)
			}
		}
	}
	if len(s.calls) != asked {
		t.Errorf("%d questions asked, %d calls ended", asked, len(s.calls))
	}
	t.Logf("rolling restart: asked %d, answered %d, told why not %d, lost %d, answered twice differently %d; longest call %s; device errors %v",
		asked, answered, told, lost, doubled, longest.Round(time.Millisecond), s.errs)
	if told > 0 {
		t.Errorf("%d questions were not answered though the device answered every one", told)
	}
}
