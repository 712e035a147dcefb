package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// fanOutFelt measures fan-out the way a person feels it: the time from
// an agent's question until the last of N devices shows it, while one
// device answers the moment the question reaches it (so the answer's own
// notification to the other devices overlaps the question's fan-out, as
// it does when someone is quick). The floor is a bare gorilla server doing
// the same work (accept the devices; on a Connect-shaped POST write one
// frame to every device and return the first reply), driven by the same
// clients, its questions alternating with the server's.
func fanOutFelt(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	var rc receipts
	var answerer atomic.Pointer[wsClient]
	var notes receipts // the server's notes that a question was answered
	onFrame := func(wc *wsClient, m *pb.WebsocketMessage) {
		if m.Cmd == "AskQuestionReplyNotification" {
			notes.note()
		}
		if m.Cmd != "AskQuestion" {
			return
		}
		if answerer.Load() == wc {
			answer(wc, m) // first, as a quick person would
		}
		rc.note()
	}
	conns, err := dialMany(ctx, s, c.fanout, onFrame)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	floorConns, err := dialFan(ctx, "/fanask", c.fanout, onFrame)
	if err != nil {
		return err
	}
	defer closeAll(floorConns)
	time.Sleep(300 * time.Millisecond) // presence settles

	// reachAll starts a question with ask and returns how long until the
	// last device had it, and until the asker had its answer.
	reachAll := func(what string, ask func() error) (lastDevice, answered time.Duration, err error) {
		rc.reset()
		t0 := time.Now()
		done := make(chan error, 1)
		go func() { done <- ask() }()
		if err := <-done; err != nil {
			return 0, 0, fmt.Errorf("%s: %w", what, err)
		}
		answered = time.Since(t0)
		at, err := rc.wait(what, c.fanout)
		return at.Sub(t0), answered, err
	}
	hc := httpClient()
	floorAsk := func(q int) func() error {
		return func() error {
			body, _ := proto.Marshal(&pb.AskQuestionRequest{ID: fmt.Sprint("floor-", q), UserToken: s.token,
				Request: &pb.McpAskQuestionRequest{Question: "all of you?", Timeout: 60}})
			resp, err := hc.Post("http://"+fl.addr+"/fanask/go", "application/proto", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("floor: %s", resp.Status)
			}
			return nil
		}
	}
	cl := agentassistprotoconnect.NewSrvAgentAssistClient(hc, s.url)
	serverAsk := func(q int) func() error {
		return func() error {
			_, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint("felt-", q), UserToken: s.token,
				Request: &pb.McpAskQuestionRequest{Question: "all of you?", Timeout: 60}})
			return err
		}
	}
	var ds, floorDs, as, floorAs []time.Duration
	for q := range c.fanoutQs {
		// A different device answers each round, as different people do.
		answerer.Store(floorConns[q%len(floorConns)])
		d, a, err := reachAll("the floor's question", floorAsk(q))
		if err != nil {
			return err
		}
		floorDs, floorAs = append(floorDs, d), append(floorAs, a)
		time.Sleep(20 * time.Millisecond)
		answerer.Store(conns[q%len(conns)])
		notes.reset()
		d, a, err = reachAll("question felt-"+fmt.Sprint(q), serverAsk(q))
		if err != nil {
			return err
		}
		// The server tells the other devices the question was answered;
		// those notes are its work, not the floor's next question's.
		if _, err := notes.wait("the note of felt-"+fmt.Sprint(q), c.fanout-1); err != nil {
			return err
		}
		ds, as = append(ds, d), append(as, a)
		time.Sleep(20 * time.Millisecond)
	}
	name := fmt.Sprintf("felt fan-out, %d devices", c.fanout)
	ms := func(ds []time.Duration, p float64) float64 { return pct(ds, p) / 1000 }
	r.add("floor: "+name+": last device has it, p50", ms(floorDs, 50), "ms")
	r.add("floor: "+name+": last device has it, p99", ms(floorDs, 99), "ms")
	r.add(name+": last device has it, p50", ms(ds, 50), "ms")
	r.add(name+": last device has it, p99", ms(ds, 99), "ms")
	ratio := pct(ds, 99) / pct(floorDs, 99)
	r.add(name+": last device p99 / floor p99", ratio, "×").target("≤ 1.2×", ratio <= 1.2)
	r.add(name+": p50 / floor p50", pct(ds, 50)/pct(floorDs, 50), "×").Note =
		"the floor's questions alternate with the server's, to the same devices' clients"
	r.add(name+": the agent has its answer, p50", ms(as, 50), "ms").Note =
		fmt.Sprintf("the floor's: %.1f ms", ms(floorAs, 50))
	return nil
}
