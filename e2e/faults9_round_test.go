//go:build unix

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
)

// lostEdits finds how many edits owed a channel logs lost with NATS's
// storage (its notes bucket wiped).
var lostEdits = regexp.MustCompile(`edits owed lost with the cluster's storage.* lost_edits=(\d+)`)

// TestFaults9Round runs with AA_FAULTS9=1 (one NATS node) or
// AA_FAULTS9=3 (a NATS cluster of three): three instances behind a
// round-robin balancer, ntfy on each, agents asking through
// agentassistant-mcp -server a,b,c and devices answering through the
// balancer, while an instance is killed -9 and started again, another
// stopped (SIGSTOP) and continued, the third cut off from NATS, NATS
// restarted (one node: the server; three: a node, then two, quorum
// lost) and wiped. Questions of a second token nobody answers time out.
// It checks every call ends with its answer (or, the second token's,
// its deadline), no question has two winners, ntfy is sent no question
// twice and no outcome twice but for a follow-up made unclaimed (NATS
// out of reach), and the cut instance's /health goes 503 and back to
// 200; it prints the counts.
func TestFaults9Round(t *testing.T) {
	nodes := os.Getenv("AA_FAULTS9")
	if nodes != "1" && nodes != "3" {
		t.Skip("AA_FAULTS9=1 or AA_FAULTS9=3 runs the round")
	}
	nt := startNtfy(t)
	s := newSoak(t)
	var ns *natstest.Server
	var natsAddrs []string
	if nodes == "3" {
		s.nats = startNATSCluster(t, 3)
		for _, nd := range s.nats.nodes {
			natsAddrs = append(natsAddrs, "127.0.0.1:"+nd.port)
		}
	} else {
		ns = natstest.Start(t)
		natsAddrs = []string{strings.TrimPrefix(ns.URL(), "nats://")}
	}
	var direct, cut []string
	for _, a := range natsAddrs {
		l, err := faultproxy.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		s.links = append(s.links, l)
		direct, cut = append(direct, "nats://"+a), append(cut, "nats://"+l.Addr())
	}
	start := func(i int) {
		url := strings.Join(direct, ",")
		if i == 2 { // instance 2 reaches NATS through the links cut
			url = strings.Join(cut, ",")
		}
		s.srvs[i] = startServerWith(t, s.ports[i], s.datas[i], []string{"-config", s.ntfyConfig(i, nt.URL), "-nats-url", url, "-instance", fmt.Sprint("i", i)}, tokenA, tokenB)
	}
	s.cluster(start)

	l := s.load()
	l.drainNtfy(nt)
	l.devices(3)
	l.agents(3, 200*time.Millisecond)
	l.unanswered(1, 6) // a deadline is a minute at least: six calls at a time

	faults := 0
	phase := func(name string, d time.Duration) {
		s.note("phase %s for %s", name, d)
		time.Sleep(d)
	}
	// health waits for instance i's /health to answer code, and says how long it took.
	health := func(i, code int) time.Duration {
		from := time.Now()
		cl := &http.Client{Timeout: 500 * time.Millisecond}
		for time.Since(from) < 60*time.Second {
			if resp, err := cl.Get("http://" + s.addr(i) + "/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == code {
					return time.Since(from)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("instance %d /health never answered %d", i, code)
		return time.Since(from)
	}
	var healthTimes []string
	phase("baseline", 8*time.Second)

	s.srvs[1].kill9(t)
	faults++
	s.note("instance 1 killed -9")
	phase("instance 1 dead", 6*time.Second)
	start(1)
	s.note("instance 1 back")
	phase("after", 6*time.Second)

	_ = s.srvs[0].cmd.Process.Signal(syscall.SIGSTOP)
	faults++
	s.note("instance 0 SIGSTOP")
	phase("instance 0 stopped", 15*time.Second)
	_ = s.srvs[0].cmd.Process.Signal(syscall.SIGCONT)
	s.note("instance 0 SIGCONT")
	phase("after", 6*time.Second)

	for _, l := range s.links {
		l.SetSilent(true)
	}
	faults++
	s.note("instance 2 partitioned from NATS (silent)")
	healthTimes = append(healthTimes, fmt.Sprintf("partition: 503 after %s", health(2, 503).Round(100*time.Millisecond)))
	phase("partitioned", 12*time.Second)
	for _, l := range s.links {
		l.SetSilent(false)
	}
	s.note("instance 2's link back")
	healthTimes = append(healthTimes, fmt.Sprintf("partition: 200 again after %s", health(2, 200).Round(100*time.Millisecond)))
	phase("after", 6*time.Second)

	if ns != nil {
		ns.Shutdown()
		faults++
		s.note("NATS stopped")
		healthTimes = append(healthTimes, fmt.Sprintf("NATS stopped: 503 after %s", health(0, 503).Round(100*time.Millisecond)))
		phase("NATS away", 8*time.Second)
		ns.Up()
		s.note("NATS back")
		healthTimes = append(healthTimes, fmt.Sprintf("NATS back: 200 after %s", health(0, 200).Round(100*time.Millisecond)))
		phase("after", 8*time.Second)
		ns.Wipe()
		faults++
		s.note("NATS restarted wiped")
	} else {
		s.nats.kill9(1)
		faults++
		s.note("NATS node 1 killed -9")
		phase("NATS 2 of 3", 8*time.Second)
		s.nats.start(1)
		s.note("NATS node 1 back")
		phase("after", 8*time.Second)
		s.nats.kill9(1)
		s.nats.kill9(2)
		faults++
		s.note("NATS nodes 1 and 2 killed -9: no quorum")
		healthTimes = append(healthTimes, fmt.Sprintf("quorum lost: 503 after %s", health(0, 503).Round(100*time.Millisecond)))
		phase("no quorum", 12*time.Second)
		s.nats.start(1)
		s.nats.start(2)
		s.note("NATS nodes 1 and 2 back")
		healthTimes = append(healthTimes, fmt.Sprintf("quorum back: 200 after %s", health(0, 200).Round(100*time.Millisecond)))
		phase("after", 10*time.Second)
		s.nats.wipe()
		faults++
		s.note("NATS restarted wiped")
	}
	for i := range 3 {
		health(i, 200)
	}
	phase("after the wipe", 20*time.Second)
	l.stopAgents()
	phase("drain", 10*time.Second)
	l.stopDevices()
	s.report()

	// ntfy: each question once, and its outcome once, by sequence ID. A
	// notice dropped from a full queue (the load here answers in
	// milliseconds) leaves a question or its outcome unsent: counted, not
	// a fault; one sent twice is.
	nt.mu.Lock()
	tl := tallyNtfy(nt.msgs)
	total := len(nt.msgs)
	nt.mu.Unlock()
	asked, settled, unasked, unsettled, twice := tl.asked, tl.settled, tl.unasked, tl.unsettled, tl.twice
	if tl.again > 0 || tl.unnamed > 0 {
		t.Errorf("ntfy: %d questions published more than once, %d outcomes named no question: %v", tl.again, tl.unnamed, tl.odd)
	}
	// A follow-up whose claim cannot be written (NATS out of reach) is
	// made anyway, twice rather than never: that many may be twice.
	// A question without its outcome keeps its buttons: each is a
	// notice dropped from a full queue or an edit owed that NATS lost
	// with its storage, both logged; any other is a follow-up lost.
	drops, anyway, lost := 0, 0, 0
	for _, srv := range s.srvs {
		logs := srv.logw.String()
		drops += strings.Count(logs, "channel notice dropped: its queue is full")
		anyway += strings.Count(logs, "follow-up not claimed; made anyway")
		for _, m := range lostEdits.FindAllStringSubmatch(logs, -1) {
			n, _ := strconv.Atoi(m[1])
			lost += n
		}
	}
	if twice > anyway {
		t.Errorf("%d outcomes published twice, %d follow-ups made unclaimed", twice, anyway)
	}
	if unsettled > drops+lost {
		t.Errorf("%d questions without their outcome, %d notices dropped and %d edits owed lost logged", unsettled, drops, lost)
	}
	deadlines, deadlinesBad := l.deadlineCalls()
	t.Logf("NATS nodes %s; faults injected %d; deadline calls %d, %d not ended by their deadline %v; ntfy %d questions, %d outcomes, %d messages, %d outcomes without their question, %d questions without their outcome, %d outcomes twice (%d follow-ups made unclaimed), queue drops logged %d, edits owed lost with NATS's storage %d; %s",
		nodes, faults, len(deadlines), len(deadlinesBad), deadlinesBad, asked, settled, total, unasked, unsettled, twice, anyway, drops, lost, strings.Join(healthTimes, "; "))
	if len(deadlinesBad) > 0 {
		t.Errorf("%d deadline calls ended otherwise", len(deadlinesBad))
	}
}
