// Command bench measures agentassistant from the outside, over real
// sockets, against the transport floor measured in the same run:
//
//	go run ./bench              # full run, prints a table, writes bench/results.json
//	go run ./bench -smoke       # seconds: checks the harness still works
//	go run ./bench -only cluster  # one step (and the floor)
//
// It starts the real agentassistant-srv (bin/, build it first) on
// loopback and drives it as clients would.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentassistant/agentassistant/internal/ingresstest"
)

type config struct {
	bin        string
	out        string
	smoke      bool
	seq        int // sequential round trips
	concurrent int
	duration   time.Duration
	mcpCalls   int
	fanout     int
	fanoutQs   int
	idle       int
	churn      int
	relayPairs int
	// Ingress streaming: devices of one session (a session holds 16 at
	// most), deltas a run flat out, runs per side, deltas a paced run.
	ingressDevices []int
	ingressEvents  int
	ingressRounds  int
	ingressPaced   int
	// Channels and push: questions per step, devices per push run.
	channelQs   int
	pushQs      int
	pushDevices []int
}

// Result is one measured figure.
type Result struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Target string  `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	Note   string  `json:"note,omitempty"`
}

type report struct {
	Started  time.Time `json:"started"`
	Machine  string    `json:"machine"`
	Smoke    bool      `json:"smoke"`
	Results  []Result  `json:"results"`
	Duration string    `json:"duration"`
}

func (r *report) add(name string, v float64, unit string) *Result {
	r.Results = append(r.Results, Result{Name: name, Value: v, Unit: unit})
	return &r.Results[len(r.Results)-1]
}

// target records the goal and whether it was met (not in smoke runs, whose
// numbers are too small to mean anything).
func (res *Result) target(desc string, met bool) {
	if smoke {
		return
	}
	res.Target, res.Met = desc, &met
}

var smoke bool

var only string

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin", "directory with agentassistant-srv and agentassistant-mcp")
	flag.StringVar(&c.out, "out", "bench/results.json", "where to write the JSON results")
	flag.BoolVar(&c.smoke, "smoke", false, "a few seconds with small numbers, no targets")
	serveFloor := flag.Bool("serve-floor", false, "internal: serve the floor endpoints and print the address")
	holdSockets := flag.Bool("hold-sockets", false, "internal: accept and hold TCP sockets until told on stdin to close them")
	kvPeer := flag.String("kv-peer", "", "internal: a peer of the cluster's JetStream floor (ask, answer or watch)")
	serveOrchestrator := flag.Bool("serve-orchestrator", false, "internal: serve the Ingress orchestrator double until stdin closes and print its URL")
	flag.StringVar(&only, "only", "", "run only the steps whose name contains this (floor always runs)")
	questions := flag.Int("questions", 0, "questions per fan-out step (default 50; more to profile the server under it)")
	flag.Parse()
	if *holdSockets {
		if err := runSocketHolder(); err != nil {
			fmt.Fprintln(os.Stderr, "socket holder:", err)
			os.Exit(1)
		}
		return
	}
	if *kvPeer != "" {
		if err := runKVPeer(*kvPeer); err != nil {
			fmt.Fprintln(os.Stderr, "floor peer:", err)
			os.Exit(1)
		}
		return
	}
	if *serveOrchestrator {
		ingresstest.Main() // exits
	}
	if *serveFloor {
		if err := runFloorServer(); err != nil {
			fmt.Fprintln(os.Stderr, "floor server:", err)
			os.Exit(1)
		}
		return
	}
	smoke = c.smoke
	if c.smoke {
		c.seq, c.concurrent, c.duration, c.mcpCalls, c.fanout, c.fanoutQs, c.idle, c.churn, c.relayPairs = 200, 8, time.Second, 50, 50, 5, 200, 200, 4
		c.ingressDevices, c.ingressEvents, c.ingressRounds, c.ingressPaced = []int{1, 4}, 200, 2, 50
		c.channelQs, c.pushQs, c.pushDevices = 5, 3, []int{1, 10, 100}
	} else {
		c.seq, c.concurrent, c.duration, c.mcpCalls, c.fanout, c.fanoutQs, c.idle, c.churn, c.relayPairs = 5000, 64, 5*time.Second, 1000, 1000, 50, 10000, 5000, 100
		c.ingressDevices, c.ingressEvents, c.ingressRounds, c.ingressPaced = []int{1, 16}, 5000, 10, 500
		c.channelQs, c.pushQs, c.pushDevices = 200, 100, []int{1, 10, 100}
	}
	if *questions > 0 {
		c.fanoutQs = *questions
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	raiseFileLimit()
	abs, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	c.bin = abs
	rep := &report{Started: time.Now(), Smoke: c.smoke, Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	steps := []struct {
		name string
		fn   func(context.Context, config, *report) error
	}{
		{"floor", floor},
		{"ask_question", askRoundTrip},
		{"through MCP", throughMCP},
		{"ask over MCP HTTP and stdio", askOverMCP},
		{"fan-out", fanOut},
		{"fan-out felt", fanOutFelt},
		{"idle memory", idleMemory},
		{"churn", churn},
		{"relay", relayThroughput},
		{"AG-UI round trip", aguiRoundTrip},
		{"Ingress delta streaming", ingressStream},
		{"channels", channelsStep},
		{"push", pushStep},
		{"cluster", clusterStep},
	}
	defer func() {
		if fl != nil {
			fl.stop()
		}
	}()
	for _, s := range steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if only != "" && s.name != "floor" && !strings.Contains(s.name, only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s…\n", s.name)
		if err := s.fn(ctx, c, rep); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	printTable(rep)
	if err := os.MkdirAll(filepath.Dir(c.out), 0o750); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(c.out, append(b, '\n'), 0o600)
}

func printTable(r *report) {
	fmt.Printf("\n%s  (%s, %s)\n\n", "agentassistant benchmarks", r.Machine, r.Duration)
	fmt.Printf("%-58s %14s  %-8s %s\n", "measure", "value", "unit", "target")
	for _, x := range r.Results {
		t := x.Target
		if x.Met != nil {
			if *x.Met {
				t += "  ✓"
			} else {
				t += "  ✗"
			}
		}
		v := fmt.Sprintf("%.1f", x.Value)
		if x.Value >= 1000 {
			v = fmt.Sprintf("%.0f", x.Value)
		} else if x.Value < 10 {
			v = fmt.Sprintf("%.2f", x.Value)
		}
		fmt.Printf("%-58s %14s  %-8s %s\n", x.Name, v, x.Unit, t)
		if x.Note != "" {
			fmt.Printf("    %s\n", x.Note)
		}
	}
	fmt.Println()
}
