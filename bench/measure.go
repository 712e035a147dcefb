package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/testhost"
)

func httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}
}

// askRoundTrip: Connect AskQuestion → /ws client that answers at once →
// response; sequential, then concurrent.
func askRoundTrip(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := dialWS(ctx, s, "answerer", answer); err != nil {
		return err
	}
	// The floor of the same work: one device of a bare connect-go and
	// gorilla server, answered by the same client code.
	floorDevs, err := dialFan(ctx, "/askdev", 1, answer)
	if err != nil {
		return err
	}
	defer closeAll(floorDevs)
	asker := func(base string) func(id string) error {
		cl := agentassistprotoconnect.NewSrvAgentAssistClient(httpClient(), base)
		return func(id string) error {
			_, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: s.token, Request: &pb.McpAskQuestionRequest{Question: "q?", Timeout: 60}})
			return err
		}
	}
	call, floorCall := asker(s.url), asker("http://"+fl.addr+"/ask")
	// The machine is shared: drift between measuring the floor and the
	// server would move the ratio. So the sequential calls alternate with
	// the floor's, in rounds, and the ratio is taken on those.
	const rounds = 10
	var ds, dsSame, dsWS, dsConnect []time.Duration
	for round := range rounds {
		warm := 20
		if round == 0 {
			warm = 200
		}
		d, err := timed(c.seq/rounds, warm, func(i int) error { return call(fmt.Sprint("s", round, "-", i)) })
		if err != nil {
			return err
		}
		ds = append(ds, d...)
		if d, err = timed(c.seq/rounds, warm, func(i int) error { return floorCall(fmt.Sprint("f", round, "-", i)) }); err != nil {
			return err
		}
		dsSame = append(dsSame, d...)
		if d, err = timed(c.seq/rounds, warm, fl.echo); err != nil {
			return err
		}
		dsWS = append(dsWS, d...)
		if d, err = timed(c.seq/rounds, warm, func(i int) error { return fl.unary(ctx, i) }); err != nil {
			return err
		}
		dsConnect = append(dsConnect, d...)
	}
	p50 := pct(ds, 50)
	floorSum := pct(dsWS, 50) + pct(dsConnect, 50)
	r.add("ask_question round trip p50 (sequential)", p50, "µs")
	r.add("ask_question round trip p99 (sequential)", pct(ds, 99), "µs").target("≤ 1000 µs", pct(ds, 99) <= 1000)
	r.add("floor alongside: WS echo p50 + Connect unary p50", floorSum, "µs").Note =
		fmt.Sprintf("measured in rounds alternating with the calls above: %.1f + %.1f µs", pct(dsWS, 50), pct(dsConnect, 50))
	r.add("ask_question p50 / (WS echo + Connect unary)", p50/floorSum, "×").Note =
		"the transports alone, without the hand-over from the call to the device and back"
	same := pct(dsSame, 50)
	r.add("floor alongside: the same ask, bare connect-go + gorilla, p50", same, "µs").Note =
		fmt.Sprintf("p99 %.1f µs; a connect-go AskQuestion that writes the question to its one device and returns the first reply", pct(dsSame, 99))
	ratio := p50 / same
	r.add("ask_question p50 / floor alongside", ratio, "×").target("≤ 1.2×", ratio <= 1.2)
	r.add("ask_question calls/s (sequential)", float64(len(ds))/sum(ds).Seconds(), "calls/s")

	var n atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(c.duration)
	start := time.Now()
	var mu sync.Mutex
	var cds []time.Duration
	for w := range c.concurrent {
		wg.Go(func() {
			var local []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if call(fmt.Sprintf("c%d-%d", w, i)) != nil {
					return
				}
				local = append(local, time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			cds = append(cds, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.add(fmt.Sprintf("ask_question calls/s (%d concurrent callers)", c.concurrent), float64(n.Load())/time.Since(start).Seconds(), "calls/s")
	r.add(fmt.Sprintf("ask_question p99 (%d concurrent callers)", c.concurrent), pct(cds, 99), "µs")
	return nil
}

func sum(ds []time.Duration) (t time.Duration) {
	for _, d := range ds {
		t += d
	}
	return t
}

// throughMCP: an MCP client over stdio calling ask_question on the real
// agentassistant-mcp; then select on the relay with a host that answers.
func throughMCP(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := dialWS(ctx, s, "answerer", answer); err != nil {
		return err
	}
	h, err := testhost.Dial(s.url, s.token, testhost.Options{})
	if err != nil {
		return err
	}
	defer h.Close()
	m, err := startMCPStdio(ctx, c, s, mcp.LATEST_PROTOCOL_VERSION)
	if err != nil {
		return err
	}
	defer m.close()
	callTool := func(name string, args map[string]any) error {
		_, err := callTool(ctx, m.c, name, args)
		return err
	}
	ds, err := timed(c.mcpCalls, 50, func(int) error { return callTool("ask_question", map[string]any{"question": "q?"}) })
	if err != nil {
		return err
	}
	r.add("through MCP: ask_question p50", pct(ds, 50), "µs")
	r.add("through MCP: ask_question p99", pct(ds, 99), "µs")

	if err := callTool("start_session", map[string]any{"study_id": "bench"}); err != nil {
		return err
	}
	ds, err = timed(c.mcpCalls, 50, func(i int) error {
		return callTool("select", map[string]any{"itemId": []string{"m1", "m2", "m3"}[i%3], "reason": "bench"})
	})
	if err != nil {
		return err
	}
	r.add("through MCP: relay select p50", pct(ds, 50), "µs")
	r.add("through MCP: relay select p99", pct(ds, 99), "µs")
	return nil
}

// churn: N clients of one token disconnect at once; time until the server
// has no connection left and its goroutines are back to the baseline.
func churn(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	time.Sleep(200 * time.Millisecond)
	h0, err := s.health(ctx)
	if err != nil {
		return err
	}
	var frames atomic.Int64
	conns, err := dialMany(ctx, s, c.churn, func(*wsClient, *pb.WebsocketMessage) { frames.Add(1) })
	if err != nil {
		return err
	}
	time.Sleep(time.Second)
	joinFrames := frames.Load()
	t0 := time.Now()
	// Half leave at once while the other half watch: presence must cost
	// O(N) frames, not O(N²).
	half := len(conns) / 2
	frames.Store(0)
	closeAll(conns[:half])
	settled, err := s.awaitHealth(ctx, t0, func(h health) bool { return h.WS == len(conns)-half })
	if err != nil {
		return fmt.Errorf("half the clients left: %w", err)
	}
	time.Sleep(300 * time.Millisecond)
	leaveFrames := frames.Load()
	t1 := time.Now()
	closeAll(conns[half:])
	gone, err := s.awaitHealth(ctx, t1, func(h health) bool { return h.WS == 0 && h.Goroutines <= h0.Goroutines+2 })
	if err != nil {
		return fmt.Errorf("everyone left (baseline %d goroutines): %w", h0.Goroutines, err)
	}
	r.add(fmt.Sprintf("churn: %d of %d disconnect at once, settled in", half, len(conns)), float64(settled.Milliseconds()), "ms").
		target("≤ 2000 ms", settled <= 2*time.Second)
	r.add(fmt.Sprintf("churn: the other %d disconnect, connections 0 and goroutines at baseline in", len(conns)-half), float64(gone.Milliseconds()), "ms").
		target("≤ 2000 ms", gone <= 2*time.Second)
	res := r.add(fmt.Sprintf("churn: frames each remaining client got for %d departures", half), float64(leaveFrames)/float64(len(conns)-half), "frames")
	res.Note = fmt.Sprintf("%.1f frames per client for %d arrivals", float64(joinFrames)/float64(len(conns)), len(conns))
	return nil
}

// awaitHealth polls the server's health until done, for a minute at the
// most, and returns how long it took since t0.
func (s *server) awaitHealth(ctx context.Context, t0 time.Time, done func(health) bool) (time.Duration, error) {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h, err := s.health(ctx)
		if err == nil && done(h) {
			return time.Since(t0), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("still %d connections, %d goroutines after 60s", h.WS, h.Goroutines)
		}
	}
}

// relayThroughput: tool calls/s through /agent/ws with P concurrent
// (token, session) pairs, each a host that answers at once and an agent
// calling in a loop, with the study log on.
func relayThroughput(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	wsURL := strings.Replace(s.url, "http", "ws", 1) + "/agent/ws"
	dial := func(role, session string) (*websocket.Conn, error) {
		ws, err := dialWebSocket(ctx, websocket.DefaultDialer, wsURL)
		if err != nil {
			return nil, err
		}
		join := fmt.Sprintf(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":%q,"sessionId":%q,"token":%q}}`, role, session, s.token)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(join)); err != nil {
			return nil, err
		}
		var m map[string]any
		if err := ws.ReadJSON(&m); err != nil {
			return nil, fmt.Errorf("join %s: %w", role, err)
		}
		if m["type"] != "relay.joined" {
			return nil, fmt.Errorf("join %s: refused: %v", role, m)
		}
		return ws, nil
	}
	type env struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		ReplyTo string          `json:"replyTo"`
		Payload json.RawMessage `json:"payload"`
	}
	var total atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	errc := make(chan error, c.relayPairs*2)
	deadline := time.Now().Add(c.duration)
	for p := range c.relayPairs {
		session := fmt.Sprint("bench-", p)
		host, err := dial("host", session)
		if err != nil {
			return err
		}
		defer func() { _ = host.Close() }()
		go func() { // the host: answers every request at once
			for {
				var e env
				if host.ReadJSON(&e) != nil {
					return
				}
				var out string
				switch e.Type {
				case "session.start":
					out = fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, e.ID)
				case "tool.call":
					out = fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.result","replyTo":%q,"payload":{"ok":true,"toolName":"select","uiSpec":{"stage":"movie","items":[{"id":"m1","label":"Dune","selected":true}],"backendData":{"secret":1}}}}`, e.ID)
				default:
					continue
				}
				if host.WriteMessage(websocket.TextMessage, []byte(out)) != nil {
					return
				}
			}
		}()
		agent, err := dial("agent", session)
		if err != nil {
			return err
		}
		defer func() { _ = agent.Close() }()
		wg.Go(func() {
			read := func(want string) error {
				for {
					var e env
					if err := agent.ReadJSON(&e); err != nil {
						return err
					}
					if e.Type == want {
						return nil
					}
					if e.Type == "error" {
						return fmt.Errorf("relay error: %s", e.Payload)
					}
				}
			}
			_ = agent.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"session.start","id":"s","payload":{}}`))
			if err := read("session.started"); err != nil {
				errc <- err
				return
			}
			var local []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				call := fmt.Sprintf(`{"v":"mvp-0.2","type":"tool.call","id":"c%d","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"bench"}}`, i)
				if err := agent.WriteMessage(websocket.TextMessage, []byte(call)); err != nil {
					errc <- err
					return
				}
				if err := read("tool.result"); err != nil {
					errc <- err
					return
				}
				local = append(local, time.Since(t0))
				total.Add(1)
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		})
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		return err
	default:
	}
	rate := float64(total.Load()) / elapsed.Seconds()
	r.add(fmt.Sprintf("relay: tool calls/s, %d (token, session) pairs, study log on", c.relayPairs), rate, "calls/s").target("≥ 5000", rate >= 5000)
	r.add("relay: tool call p99", pct(all, 99)/1000, "ms").target("≤ 20 ms", pct(all, 99)/1000 <= 20)
	return nil
}
