package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// clusterStep: the same ask round trip and fan-out measured on one
// instance and on a cluster of three (NATS with JetStream in this process,
// three agentassistant-srv processes), in the same run. In the cluster the
// agent asks through instance A and the device answering is on C; the
// fan-out's devices are spread over the three, the question asked
// through A. Memory is each process's resident set with its share of the
// devices connected.
func clusterStep(ctx context.Context, c config, r *report) error {
	n, qs, seq := 3000, 20, 1000
	if c.smoke {
		n, qs, seq = 60, 3, 50
	}
	single, err := startServer(c)
	if err != nil {
		return err
	}
	one, err := measureCluster(ctx, []*server{single}, n, qs, seq, c.duration, nil)
	single.stop()
	if err != nil {
		return fmt.Errorf("one instance: %w", err)
	}

	ns, dir, err := startNATS()
	if err != nil {
		return err
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}()
	var srvs []*server
	defer func() {
		for _, s := range srvs {
			s.stop()
		}
	}()
	for _, name := range []string{"a", "b", "c"} {
		s, err := startServerWith(c, serverExtras{args: []string{"-nats-url", ns.ClientURL(), "-instance", name}})
		if err != nil {
			return err
		}
		srvs = append(srvs, s)
	}
	// The floor, on the same NATS server, right after the cluster's
	// sequential asks (kvfloor.go).
	var floor50, floor99 float64
	three, err := measureCluster(ctx, srvs, n, qs, seq, c.duration, func() error {
		var err error
		floor50, floor99, err = kvFloor(ctx, ns.ClientURL(), seq)
		return err
	})
	if err != nil {
		return fmt.Errorf("three instances: %w", err)
	}

	r.add("one instance: ask_question p50", one.askP50, "µs")
	r.add("cluster: ask_question p50 (agent via A, device on C)", three.askP50, "µs")
	r.add("cluster floor: JetStream create, watch, update, watch: p50", floor50, "µs").Note =
		fmt.Sprintf("p99 %.0f µs", floor99)
	r.add("cluster: ask p50 above one instance's ÷ that floor", (three.askP50-one.askP50)/floor50, "×")
	r.add("cluster: ask_question p99", three.askP99, "µs").Note = fmt.Sprintf("one instance p99: %.0f µs", one.askP99)
	r.add("cluster: ask_question p50 / one instance's", three.askP50/one.askP50, "×")
	r.add("one instance: ask_question calls/s (sequential)", one.perSec, "calls/s")
	r.add("cluster: ask_question calls/s (sequential)", three.perSec, "calls/s")
	r.add("one instance: ask_question calls/s, 64 callers", one.concurrent, "calls/s")
	r.add("cluster: ask_question calls/s, 64 callers over 3", three.concurrent, "calls/s")
	name := fmt.Sprintf("fan-out to %d devices", n)
	r.add("one instance: "+name+", last has it, p50", one.fanP50/1000, "ms")
	r.add("one instance: "+name+", last has it, p99", one.fanP99/1000, "ms")
	r.add("cluster: "+name+" (⅓ each), last has it, p50", three.fanP50/1000, "ms")
	r.add("cluster: "+name+" (⅓ each), last has it, p99", three.fanP99/1000, "ms").Note =
		fmt.Sprintf("p99 / one instance's p99: %.2f×", three.fanP99/one.fanP99)
	r.add(fmt.Sprintf("one instance: resident memory, %d devices", n), float64(one.rssKB[0])/1024, "MiB")
	var sum int
	for _, kb := range three.rssKB {
		sum += kb
	}
	r.add(fmt.Sprintf("cluster: resident memory per instance, %d devices each", n/3), float64(sum)/3/1024, "MiB").Note =
		fmt.Sprintf("a, b, c: %d, %d, %d MiB", three.rssKB[0]/1024, three.rssKB[1]/1024, three.rssKB[2]/1024)
	return nil
}

type clusterFigures struct {
	askP50, askP99, perSec float64
	concurrent             float64 // calls/s, 64 callers
	fanP50, fanP99         float64
	rssKB                  []int
}

// measureCluster asks through srvs[0] with the answering device on the
// last of srvs (C), then runs floor (when set), then fans out to n
// devices spread over srvs.
func measureCluster(ctx context.Context, srvs []*server, n, qs, seq int, d time.Duration, floor func() error) (clusterFigures, error) {
	var f clusterFigures
	first, last := srvs[0], srvs[len(srvs)-1]
	answerer, err := dialWS(ctx, last, "answerer", answer)
	if err != nil {
		return f, err
	}
	ask := agentassistprotoconnect.NewSrvAgentAssistClient(httpClient(), first.url)
	ds, err := timed(seq, seq/10, func(i int) error {
		_, err := ask.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint("rt-", i), UserToken: first.token,
			Request: &pb.McpAskQuestionRequest{Question: "q?", Timeout: 60}})
		return err
	})
	if err != nil {
		closeAll([]*wsClient{answerer})
		return f, err
	}
	f.askP50, f.askP99, f.perSec = pct(ds, 50), pct(ds, 99), float64(len(ds))/sum(ds).Seconds()
	if floor != nil {
		if err := floor(); err != nil {
			closeAll([]*wsClient{answerer})
			return f, fmt.Errorf("JetStream floor: %w", err)
		}
	}
	// 64 callers at once, spread over the instances, for d.
	var calls atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	t0 := time.Now()
	for w := range 64 {
		cl := agentassistprotoconnect.NewSrvAgentAssistClient(httpClient(), srvs[w%len(srvs)].url)
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				if _, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprintf("cc%d-%d", w, i), UserToken: first.token,
					Request: &pb.McpAskQuestionRequest{Question: "q?", Timeout: 60}}); err != nil {
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	f.concurrent = float64(calls.Load()) / time.Since(t0).Seconds()
	closeAll([]*wsClient{answerer})

	var rc receipts
	var want atomic.Value // the question's ID the receipts count
	onFrame := func(_ *wsClient, m *pb.WebsocketMessage) {
		if m.Cmd == "AskQuestion" && m.GetAskQuestionRequest().GetID() == want.Load() {
			rc.note()
		}
	}
	var conns []*wsClient
	defer func() { closeAll(conns) }()
	for i, s := range srvs {
		k := n / len(srvs)
		if i == 0 {
			k += n % len(srvs)
		}
		cs, err := dialMany(ctx, s, k, onFrame)
		if err != nil {
			return f, err
		}
		conns = append(conns, cs...)
	}
	time.Sleep(300 * time.Millisecond) // presence settles
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(httpClient(), first.url)
	var fan []time.Duration
	for q := range qs {
		id := fmt.Sprint("fan-", q)
		want.Store(id)
		rc.reset()
		done := make(chan error, 1)
		t0 := time.Now()
		go func() {
			_, err := ask.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: first.token, Request: &pb.McpAskQuestionRequest{Question: "all of you?", Timeout: 60}})
			done <- err
		}()
		at, err := rc.wait("question "+id, n)
		if err != nil {
			return f, err
		}
		fan = append(fan, at.Sub(t0))
		if _, err := reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: first.token, Response: &pb.AskQuestionResponse{ID: id}}); err != nil {
			return f, err
		}
		if err := <-done; err != nil {
			return f, err
		}
		time.Sleep(50 * time.Millisecond) // let the reply notifications drain
	}
	f.fanP50, f.fanP99 = pct(fan, 50), pct(fan, 99)
	for _, s := range srvs {
		kb, err := s.rssKB()
		if err != nil {
			return f, err
		}
		f.rssKB = append(f.rssKB, kb)
	}
	return f, nil
}

// startNATS runs a NATS server with JetStream in this process, on a free
// loopback port, its data in a temporary directory.
func startNATS() (*natsserver.Server, string, error) {
	dir, err := os.MkdirTemp("", "aa-bench-nats-")
	if err != nil {
		return nil, "", err
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("new NATS server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		_ = os.RemoveAll(dir)
		return nil, "", errors.New("NATS server not ready")
	}
	return ns, dir, nil
}
