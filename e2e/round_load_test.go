//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/balancer"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// newSoak is a soak of t, its clock started.
func newSoak(t *testing.T) *soak {
	return &soak{t: t, start: time.Now(), winners: map[string]map[string]bool{}, qtext: map[string]string{}, errs: map[string]int{}, health: map[int][]string{}}
}

// cluster starts three instances, each on a free port with a data
// directory of its own, with start (which sets s.srvs[i] from s.ports[i]
// and s.datas[i], and is called again to restart one), and the balancer
// in front of them.
func (s *soak) cluster(start func(i int)) {
	s.srvs = make([]*server, 3)
	for i := range 3 {
		s.ports = append(s.ports, freePort(s.t))
		s.datas = append(s.datas, s.t.TempDir())
		start(i)
	}
	lb, err := balancer.Start([]string{s.addr(0), s.addr(1), s.addr(2)})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { lb.Close() })
	s.lb = lb
}

// ntfyConfig writes instance i's config of a round, both tokens and ntfy
// at url, into its data directory, and returns its path.
func (s *soak) ntfyConfig(i int, url string) string {
	config := fmt.Sprintf("tokens = [%q, %q]\n[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-round\"\n", tokenA, tokenB, url)
	path := filepath.Join(s.datas[i], "channels.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// load is the load a soak or a round puts on a cluster: devices, which
// outlive the agents' last calls, and agents. Its goroutines are its own
// until stopAgents and stopDevices have waited for them.
type load struct {
	s                   *soak
	ctx, dctx           context.Context
	stopA, stopD        context.CancelFunc
	agentsWG, devicesWG sync.WaitGroup
	mu                  sync.Mutex
	deadlines, deadBad  []string // the deadline callers' questions, and those ended otherwise
}

func (s *soak) load() *load {
	l := &load{s: s}
	l.ctx, l.stopA = context.WithCancel(context.Background())
	l.dctx, l.stopD = context.WithCancel(context.Background())
	return l
}

// goDevice runs f until the devices stop.
func (l *load) goDevice(f func(ctx context.Context)) { l.devicesWG.Go(func() { f(l.dctx) }) }

// devices connects n devices of tokenA through the balancer, each
// answering every question it is shown (soak.device).
func (l *load) devices(n int) {
	for i := range n {
		l.goDevice(func(ctx context.Context) { l.s.device(ctx, fmt.Sprint("dev", i)) })
	}
}

// agents has n agents of tokenA ask one question after another
// (soak.agent, pace apart), agent a through agentassistant-mcp -server
// a,b,c starting at instance a%3.
func (l *load) agents(n int, pace time.Duration) {
	for a := range n {
		host, port, _ := net.SplitHostPort(l.s.addr(a % 3))
		agent := startMCP(l.s.t, &server{Host: host, Port: port}, tokenA, "-server", l.s.serverList())
		l.agentsWG.Go(func() { l.s.agent(l.ctx, a, agent, pace) })
	}
}

// drainNtfy takes the ntfy double's signal of each publish; nobody waits
// on them here.
func (l *load) drainNtfy(nt *ntfyDouble) {
	l.goDevice(func(ctx context.Context) {
		for {
			select {
			case <-nt.more:
			case <-ctx.Done():
				return
			}
		}
	})
}

// unanswered has a device of tokenB see its questions and answer none,
// and n callers of tokenB's agent, through instance via first, ask one
// question after another, each of which must end at its deadline.
func (l *load) unanswered(via, n int) {
	l.goDevice(func(ctx context.Context) {
		for ctx.Err() == nil {
			d, err := wstest.Dial("http://"+l.s.lb.Addr(), tokenB, "silent", nil)
			if err != nil || !d.Login.GetSuccess() {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ctx.Err() == nil {
				if _, err := d.Next(time.Second); err != nil && !strings.Contains(err.Error(), "no frame within") {
					break
				}
			}
			d.Close()
		}
	})
	host, port, _ := net.SplitHostPort(l.s.addr(via))
	agent := startMCP(l.s.t, &server{Host: host, Port: port}, tokenB, "-server", l.s.serverList())
	for d := range n {
		l.agentsWG.Go(func() {
			for i := 0; l.ctx.Err() == nil; i++ {
				q := fmt.Sprintf("dl-%d-%d", d, i)
				cctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
				r, err := callTool(cctx, agent, "ask_question", map[string]any{"question": q, "project_directory": "/dl", "timeout": 60})
				cancel()
				l.mu.Lock()
				l.deadlines = append(l.deadlines, q)
				if err != nil || !strings.HasPrefix(resultText(r), "No one answered") {
					l.deadBad = append(l.deadBad, fmt.Sprintf("%s: %v %q", q, err, resultText(r)))
				}
				l.mu.Unlock()
			}
		})
	}
}

// stopAgents ends the agents' calls and waits for them.
func (l *load) stopAgents() { l.stopA(); l.agentsWG.Wait() }

// stopDevices ends the devices and waits for them.
func (l *load) stopDevices() { l.stopD(); l.devicesWG.Wait() }

// deadlineCalls are the unanswered calls made, and those that ended
// otherwise than at their deadline; after stopAgents.
func (l *load) deadlineCalls() (all, bad []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadlines, l.deadBad
}
