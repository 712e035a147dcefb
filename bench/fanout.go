package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// receipts counts the devices that had a question and when the last one
// had it; the fan-out steps share it.
type receipts struct {
	got  atomic.Int64
	last atomic.Int64 // unix nanos of the latest receipt
}

// note counts one receipt, now.
func (r *receipts) note() {
	now := time.Now().UnixNano()
	for {
		old := r.last.Load()
		if now <= old || r.last.CompareAndSwap(old, now) {
			break
		}
	}
	r.got.Add(1)
}

func (r *receipts) reset() {
	r.got.Store(0)
	r.last.Store(0)
}

// wait returns when the last of n devices had what, at most 10 s on.
func (r *receipts) wait(what string, n int) (time.Time, error) {
	for deadline := time.Now().Add(10 * time.Second); r.got.Load() < int64(n); time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s reached %d of %d devices", what, r.got.Load(), n)
		}
	}
	return time.Unix(0, r.last.Load()), nil
}

// fanOut: one question to N /ws clients of one token; time until the last
// one has it.
func fanOut(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	var rc receipts
	onFrame := func(_ *wsClient, m *pb.WebsocketMessage) {
		if m.Cmd == "AskQuestion" {
			rc.note()
		}
	}
	conns, err := dialMany(ctx, s, c.fanout, onFrame)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	floorConns, err := dialFan(ctx, "/fan", c.fanout, onFrame)
	if err != nil {
		return err
	}
	defer closeAll(floorConns)
	time.Sleep(300 * time.Millisecond) // presence settles
	// reachAll starts a broadcast with send and returns how long until the
	// last of the clients had it.
	reachAll := func(what string, send func() error) (time.Duration, error) {
		rc.reset()
		t0 := time.Now()
		if err := send(); err != nil {
			return 0, err
		}
		at, err := rc.wait(what, c.fanout)
		return at.Sub(t0), err
	}
	// The floor's broadcast, alternating with the server's questions.
	floorBroadcast := func() error {
		resp, err := fl.http.Post("http://"+fl.addr+"/fan/go", "", nil)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	ask := agentassistprotoconnect.NewSrvAgentAssistClient(httpClient(), s.url)
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(httpClient(), s.url)
	var ds, floorDs []time.Duration
	for q := range c.fanoutQs {
		d, err := reachAll("the floor's broadcast", floorBroadcast)
		if err != nil {
			return err
		}
		floorDs = append(floorDs, d)
		time.Sleep(20 * time.Millisecond)
		id := fmt.Sprint("fan-", q)
		done := make(chan error, 1)
		d, err = reachAll("question "+id, func() error {
			go func() {
				_, err := ask.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: s.token, Request: &pb.McpAskQuestionRequest{Question: "all of you?", Timeout: 60}})
				done <- err
			}()
			return nil
		})
		if err != nil {
			return err
		}
		ds = append(ds, d)
		if _, err := reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: s.token, Response: &pb.AskQuestionResponse{ID: id}}); err != nil {
			return err
		}
		if err := <-done; err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond) // let the reply notifications drain
	}
	name := fmt.Sprintf("fan-out to %d clients", c.fanout)
	r.add("floor: "+name+", bare gorilla broadcast, p50", pct(floorDs, 50)/1000, "ms")
	r.add("floor: "+name+", bare gorilla broadcast, p99", pct(floorDs, 99)/1000, "ms")
	r.add(name+": last one has it, p50", pct(ds, 50)/1000, "ms")
	r.add(name+": last one has it, p99", pct(ds, 99)/1000, "ms").target("≤ 10 ms", pct(ds, 99)/1000 <= 10)
	ratio := pct(ds, 99) / pct(floorDs, 99)
	r.add(name+": p99 / floor p99", ratio, "×").Note = "the floor's questions alternate with the server's, to the same number of clients"
	return nil
}

// dialMany logs in n clients, 64 at a time.
func dialMany(ctx context.Context, s *server, n int, onFrame func(*wsClient, *pb.WebsocketMessage)) ([]*wsClient, error) {
	out := make([]*wsClient, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dialWS(ctx, s, fmt.Sprint("c", i), onFrame)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			out[i] = c
		})
	}
	wg.Wait()
	if first != nil {
		closeAll(out)
		return nil, first
	}
	return out, nil
}

func closeAll(cs []*wsClient) {
	for _, c := range cs {
		if c != nil {
			_ = c.ws.NetConn().Close()
		}
	}
}
