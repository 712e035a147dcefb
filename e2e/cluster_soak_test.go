//go:build unix

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/balancer"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// soak is a cluster under load while faults are injected: three
// agentassistant-srv behind a balancer, a three-node NATS cluster, agents
// through agentassistant-mcp -server a,b,c, devices over /ws through the
// balancer, every device answering every question (a race each time).
type soak struct {
	t     *testing.T
	nats  *natsCluster
	links []*faultproxy.Proxy // instance c's links to the NATS nodes
	ports []string
	datas []string
	srvs  []*server
	lb    *balancer.Balancer
	start time.Time

	mu      sync.Mutex
	events  []string
	calls   []soakCall
	winners map[string]map[string]bool // question ID -> answers devices were told won
	qtext   map[string]string          // question ID -> question
	errs    map[string]int             // device error codes
	health  map[int][]string           // instance -> transitions
}

type soakCall struct {
	agent int
	q     string
	got   string
	err   string
	isErr bool
	from  time.Duration
	took  time.Duration
}

func (s *soak) note(format string, args ...any) {
	line := fmt.Sprintf("%7.1fs ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.events = append(s.events, line)
	s.mu.Unlock()
	s.t.Log(line)
}

func (s *soak) startSrv(i int) {
	url := s.nats.URLs()
	if i == 2 {
		var us []string
		for _, l := range s.links {
			us = append(us, "nats://"+l.Addr())
		}
		url = strings.Join(us, ",")
	}
	s.srvs[i] = startServerWith(s.t, s.ports[i], s.datas[i], []string{"-nats-url", url, "-instance", fmt.Sprint("i", i)}, tokenA)
}

func (s *soak) addr(i int) string { return "127.0.0.1:" + s.ports[i] }

func (s *soak) serverList() string {
	return s.addr(0) + "," + s.addr(1) + "," + s.addr(2)
}

// TestClusterSoak runs only with AA_SOAK=1: a few minutes of load with
// every fault of the list; it prints the counts.
func TestClusterSoak(t *testing.T) {
	if os.Getenv("AA_SOAK") == "" {
		t.Skip("AA_SOAK=1 runs the soak")
	}
	s := newSoak(t)
	s.nats = startNATSCluster(t, 3)
	for _, nd := range s.nats.nodes {
		l, err := faultproxy.Start("127.0.0.1:" + nd.port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		s.links = append(s.links, l)
	}
	s.cluster(s.startSrv)

	// The devices and the health watch outlive the agents' last calls.
	l := s.load()
	l.devices(3)
	l.goDevice(s.watchHealth)
	agents := 4
	if n := os.Getenv("AA_SOAK_AGENTS"); n != "" {
		fmt.Sscan(n, &agents)
	}
	l.agents(agents, 0)

	s.faults(l.ctx)
	l.stopAgents()
	l.stopDevices()
	s.report()
}

func (s *soak) faults(ctx context.Context) {
	t := s.t
	phase := func(name string, d time.Duration) {
		s.note("phase %s for %s", name, d)
		time.Sleep(d)
	}
	only := os.Getenv("AA_SOAK_ONLY")
	run := func(name string) bool { return only == "" || strings.Contains(only, name) }
	phase("baseline", 10*time.Second)
	if run("kill9") {
		s.srvs[1].kill9(t)
		s.note("instance 1 killed -9")
		phase("instance 1 dead", 8*time.Second)
		s.startSrv(1)
		s.note("instance 1 back")
		phase("after", 8*time.Second)
	}
	if run("stop") {
		_ = s.srvs[0].cmd.Process.Signal(syscall.SIGSTOP)
		s.note("instance 0 SIGSTOP")
		phase("instance 0 stopped", 20*time.Second)
		_ = s.srvs[0].cmd.Process.Signal(syscall.SIGCONT)
		s.note("instance 0 SIGCONT")
		phase("after", 8*time.Second)
	}
	if run("natsone") {
		s.nats.kill9(1)
		s.note("NATS node 1 killed -9")
		phase("NATS 2 of 3", 10*time.Second)
		s.nats.start(1)
		s.note("NATS node 1 back")
		phase("after", 8*time.Second)
	}
	if run("quorum") {
		s.nats.kill9(1)
		s.nats.kill9(2)
		s.note("NATS nodes 1 and 2 killed -9: no quorum")
		phase("no quorum", 20*time.Second)
		s.nats.start(1)
		s.nats.start(2)
		s.note("NATS nodes 1 and 2 back")
		phase("after", 15*time.Second)
	}
	if run("cut10") {
		for _, l := range s.links {
			l.SetSilent(true)
		}
		s.note("instance 2's link to NATS silent")
		phase("cut", 10*time.Second)
		for _, l := range s.links {
			l.SetSilent(false)
		}
		s.note("instance 2's link back")
		phase("after", 8*time.Second)
	}
	if run("cut60") {
		for _, l := range s.links {
			l.SetDown(true)
		}
		s.note("instance 2's link to NATS down (reset)")
		phase("cut", 60*time.Second)
		for _, l := range s.links {
			l.SetDown(false)
		}
		s.note("instance 2's link back")
		phase("after", 10*time.Second)
	}
	if run("wipe") {
		s.nats.wipe()
		s.note("NATS restarted with its storage wiped")
		phase("after", 30*time.Second)
	}
	phase("drain", 10*time.Second)
}

// watchHealth records each instance's /health changes.
func (s *soak) watchHealth(ctx context.Context) {
	last := map[int]int{}
	cl := &http.Client{Timeout: 500 * time.Millisecond}
	for ctx.Err() == nil {
		for i := range 3 {
			code := 0
			resp, err := cl.Get("http://" + s.addr(i) + "/health")
			if err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			if code != last[i] {
				last[i] = code
				s.note("instance %d /health %d", i, code)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agent asks one question after another, pace apart (0: at once; a few
// a second is a load the channels' queues keep up with, so that a notice
// missing or twice at ntfy is a fault's), and notes the calls gone wrong
// or slow.
func (s *soak) agent(ctx context.Context, a int, agent *client.Client, pace time.Duration) {
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	for n := 0; ctx.Err() == nil; n++ {
		q := fmt.Sprintf("q-%d-%d", a, n)
		from := time.Since(s.start)
		cctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
		r, err := callTool(cctx, agent, "ask_question", map[string]any{"question": q, "project_directory": fmt.Sprint("/p", a), "timeout": 120})
		cancel()
		c := soakCall{agent: a, q: q, from: from, took: time.Since(s.start) - from}
		if err != nil {
			c.err = err.Error()
		} else {
			c.got, c.isErr = resultText(r), r.IsError
		}
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
		if c.err != "" || c.isErr || !strings.HasPrefix(c.got, "A|"+q+"|") {
			s.mu.Lock()
			var ids []string
			for id, text := range s.qtext {
				if text == q {
					ids = append(ids, id)
				}
			}
			s.mu.Unlock()
			s.note("agent %d %s: err=%q isErr=%v got=%q took=%s; devices saw it as %v", a, q, c.err, c.isErr, c.got, c.took.Round(time.Millisecond), ids)
		} else if c.took > 5*time.Second {
			s.note("agent %d %s took %s", a, q, c.took.Round(time.Millisecond))
		}
		if tick != nil {
			select {
			case <-ctx.Done():
			case <-tick:
			}
		}
	}
}

// device stays connected through the balancer (dialling again when its
// instance goes), answers every question it is shown, and answers again
// a question it has not seen settled for a while.
func (s *soak) device(ctx context.Context, name string) {
	for ctx.Err() == nil {
		d, err := wstest.Dial("http://"+s.lb.Addr(), tokenA, name, nil)
		if err != nil || !d.Login.GetSuccess() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		_ = d.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}) // the pending questions come first
		s.serveDevice(ctx, d, name)
		d.Close()
	}
}

func (s *soak) serveDevice(ctx context.Context, d *wstest.Client, name string) {
	seen := map[string]time.Time{}
	answer := func(id, q string) {
		_ = d.Send(wstest.TextReply(id, "A|"+q+"|"+name))
		seen[id] = time.Now()
	}
	for ctx.Err() == nil {
		m, err := d.Next(time.Second)
		if err != nil {
			if strings.Contains(err.Error(), "no frame within") {
				s.mu.Lock()
				var again [][2]string
				for id, at := range seen {
					if time.Since(at) > 3*time.Second {
						again = append(again, [2]string{id, s.qtext[id]})
					}
				}
				s.mu.Unlock()
				for _, a := range again {
					answer(a[0], a[1])
				}
				continue
			}
			return
		}
		switch m.Cmd {
		case "AskQuestion":
			q := m.GetAskQuestionRequest()
			id, text := q.GetID(), q.GetRequest().GetQuestion()
			if os.Getenv("AA_SOAK_V") != "" {
				s.note("%s shown %s %s", name, id, text)
			}
			s.mu.Lock()
			s.qtext[id] = text
			s.mu.Unlock()
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			answer(id, text)
		case "AskQuestionReplyNotification":
			id := m.GetAskQuestionRequest().GetID()
			var got string
			for _, c := range m.GetAskQuestionResponse().GetContents() {
				got += c.GetText().GetText()
			}
			delete(seen, id)
			s.mu.Lock()
			if s.winners[id] == nil {
				s.winners[id] = map[string]bool{}
			}
			s.winners[id][got] = true
			s.mu.Unlock()
		case "RequestCancelled":
			delete(seen, m.GetAskQuestionRequest().GetID())
		case "Error":
			code := m.GetError().GetCode()
			if code != "not_pending" && os.Getenv("AA_SOAK_V") != "" {
				s.note("%s: error %s for %s: %s", name, code, m.GetError().GetRequestId(), m.GetError().GetMessage())
			}
			s.mu.Lock()
			s.errs[code]++
			s.mu.Unlock()
			if code == "not_pending" {
				delete(seen, m.GetError().GetRequestId()) // settled: nothing to answer again
			}
		}
	}
}

func (s *soak) report() {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok, bad int
	byAnswer := map[string]int{}
	var slow []string
	var longest time.Duration
	for _, c := range s.calls {
		if c.err == "" && !c.isErr && strings.HasPrefix(c.got, "A|"+c.q+"|") {
			ok++
			byAnswer[c.q]++
		} else {
			bad++
		}
		longest = max(longest, c.took)
		if c.took > 10*time.Second {
			slow = append(slow, fmt.Sprintf("%s at %s took %s", c.q, c.from.Round(time.Second), c.took.Round(time.Millisecond)))
		}
	}
	twice := 0
	for id, w := range s.winners {
		if len(w) > 1 {
			twice++
			t.Errorf("question %s (%s): devices told of %d winners: %v", id, s.qtext[id], len(w), w)
		}
	}
	// Every question a device was told was won reaches its agent with that answer.
	agentGot := map[string]string{}
	for _, c := range s.calls {
		agentGot[c.q] = c.got
	}
	lost := 0
	for id, w := range s.winners {
		q := s.qtext[id]
		for a := range w {
			if g, ok := agentGot[q]; ok && g != a {
				lost++
				t.Errorf("question %s: devices were told %q won, the agent got %q", q, a, g)
			}
		}
	}
	sort.Strings(slow)
	t.Logf("calls: %d answered right, %d not; devices told of %d settled questions, %d with two winners, %d where the agent got another answer; longest call %s; device errors %v",
		ok, bad, len(s.winners), twice, lost, longest.Round(time.Millisecond), s.errs)
	t.Logf("calls over 10s: %d\n%s", len(slow), strings.Join(slow, "\n"))
	if bad > 0 {
		t.Errorf("%d calls ended without their answer", bad)
	}
}
