package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// server is a running agentassistant-srv.
type server struct {
	url, host, port, token, data string
	cmd                          *exec.Cmd
}

// serverProcs is the GOMAXPROCS of the agentassistant-srv the bench
// starts: half the CPUs, since the clients that drive it run on the same
// machine, and each CPU more the server may wake costs a request a
// cross-CPU wake-up (docs/benchmarks.md, item 15). The product itself
// leaves GOMAXPROCS to the runtime; so do the floor processes, as bare
// servers would. A GOMAXPROCS in the bench's own environment wins.
func serverProcs() []string {
	if os.Getenv("GOMAXPROCS") != "" {
		return nil
	}
	return []string{fmt.Sprintf("GOMAXPROCS=%d", max(1, runtime.NumCPU()/2))}
}

// extraServerEnv is added to the server's environment (experiments:
// AA_BENCH_SERVER_ENV="GOGC=50").
var extraServerEnv = strings.Fields(os.Getenv("AA_BENCH_SERVER_ENV"))

var urlLine = regexp.MustCompile(`http://\S+/\?token=\S+`)

// serverConfig is the bench's: all its clients come from one address and
// one token, log in 64 at a time, keep up to 256 idle keep-alive
// connections per HTTP client, and run 100 relay sessions of one token
// (more than one person's machine would).
const serverConfig = `[server]
log_level = "warn"

[limits]
inbox_connections_per_token = 50000
unauthenticated_per_address = 256
idle_connections = 4096
idle_connections_per_address = 4096

[relay]
max_sessions_per_token = 4096
max_connections_per_token = 8192
max_state_bytes_per_token = 1073741824
`

func startServer(c config) (*server, error) {
	return startServerWith(c, serverExtras{})
}

// serverExtras are what a step adds to the bench's server.
type serverExtras struct {
	config string   // TOML tables after the bench's (its own last table is [relay])
	args   []string // flags
	env    []string // environment
	// prepare, when set, writes what the step needs into the data
	// directory before the server starts (the subscriptions of push
	// devices).
	prepare func(data, token string) error
}

func startServerWith(c config, x serverExtras) (*server, error) {
	data, err := os.MkdirTemp("", "aa-bench-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(data, "srv.toml")
	if err := os.WriteFile(cfg, []byte(serverConfig+x.config), 0o600); err != nil {
		return nil, err
	}
	token := "bench-token-0123456789abcdef"
	if x.prepare != nil {
		if err := x.prepare(data, token); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(filepath.Join(c.bin, "agentassistant-srv"), append([]string{"-port", "0", "-data", data, "-config", cfg, "-token", token}, x.args...)...) // #nosec G204 -- the built server
	cmd.Env = append(append(append(os.Environ(), serverProcs()...), extraServerEnv...), x.env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (run make build first): %w", cmd.Path, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := urlLine.FindString(sc.Text()); m != "" {
				found <- m
			}
		}
	}()
	select {
	case line := <-found:
		u, _ := url.Parse(line)
		return &server{url: "http://" + u.Host, host: u.Hostname(), port: u.Port(), token: token, data: data, cmd: cmd}, nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		return nil, errors.New("server printed no URL")
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(s.data)
}

// rssKB reads the server's resident set size.
func (s *server) rssKB() (int, error) { return rssKB(s.cmd.Process.Pid) }

// rssKB reads a process's resident set size.
func rssKB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strconv.Atoi(strings.Fields(l)[1])
		}
	}
	return 0, errors.New("no VmRSS")
}

type health struct {
	WS         int `json:"wsConnections"`
	Goroutines int `json:"goroutines"`
}

func (s *server) health(ctx context.Context) (health, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/health", nil)
	req.Header.Set("X-Agentassistant-Token", s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return health{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var h health
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// pct returns the p-th percentile (0..100) of ds in microseconds.
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i].Nanoseconds()) / 1e3
}

// timed runs fn warm times unmeasured, then n times, and returns how long
// each measured call took.
func timed(n, warm int, fn func(i int) error) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := range warm + n {
		t0 := time.Now()
		if err := fn(i); err != nil {
			return nil, err
		}
		if i >= warm {
			ds = append(ds, time.Since(t0))
		}
	}
	return ds, nil
}

// freeLoopbackAddr returns a loopback address with a port free just now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// memory is the server's memory by the runtime's classes, grouped.
type memory struct {
	objects uint64 // live and not yet swept heap objects
	idle    uint64 // heap memory free but not returned to the OS
	runtime uint64 // the runtime's own: stacks, span and GC metadata, descriptors
}

// readMemory asks the server's profiling listener for /debug/memory.
func readMemory(ctx context.Context, addr string) (memory, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/memory", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return memory{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var m map[string]uint64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return memory{}, err
	}
	var out memory
	for k, v := range m {
		switch k {
		case "/memory/classes/heap/objects:bytes":
			out.objects += v
		case "/memory/classes/heap/free:bytes", "/memory/classes/heap/unused:bytes":
			out.idle += v
		case "/memory/classes/heap/released:bytes", "/memory/classes/total:bytes":
		default:
			out.runtime += v
		}
	}
	return out, nil
}

// child is this very binary run in one of its internal modes (the floor
// server, the socket holder, a JetStream floor peer), which prints its
// address, or that it is ready, first.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	addr string
}

// startChild runs this binary with args, env added to its environment,
// and reads the first line it prints into addr.
func startChild(ctx context.Context, env []string, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, args...) // #nosec G204 -- this very binary
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	cmd.Env = append(append(os.Environ(), strings.Fields(os.Getenv("AA_BENCH_FLOOR_ENV"))...), env...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(stdout)}
	addr, err := c.out.ReadString('\n')
	if err != nil {
		c.stop()
		return nil, err
	}
	c.addr = strings.TrimSpace(addr)
	return c, nil
}

func (c *child) stop() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}
