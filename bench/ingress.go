package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	sse "github.com/tmaxmax/go-sse"
)

// ingressStream: an orchestrator (internal/ingresstest's, in a process of
// its own, configured as orchestrator_url) streams a run's deltas over
// Server-Sent Events; the server hands each to every device of the
// session on /ingress/ws. Measured: the events a device gets per second
// when the orchestrator streams as fast as it can, and the time from the
// orchestrator's send to a device's receipt at a steady 1000 events/s
// (each delta's text is its send time). The floor is the same
// orchestrator's same stream through the floor process's bare relay
// (go-sse in, gorilla's writer goroutine and channel per connection out),
// its rounds alternating with the server's.
func ingressStream(ctx context.Context, c config, r *report) error {
	orch, err := startChild(ctx, nil, "-serve-orchestrator")
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	defer orch.stop()
	s, err := startServerWith(c, serverExtras{config: fmt.Sprintf("\n[ingress]\norchestrator_url = %q\n", orch.addr)})
	if err != nil {
		return err
	}
	defer s.stop()
	for _, n := range c.ingressDevices {
		if err := ingressStreamTo(ctx, c, r, s, orch.addr, n); err != nil {
			return err
		}
	}
	return nil
}

func ingressStreamTo(ctx context.Context, c config, r *report, s *server, orch string, n int) error {
	tallies := make(chan streamTally, 4*n)
	devices, err := dialIngress(ctx, s, fmt.Sprint("bench-", n), n, tallies)
	if err != nil {
		return err
	}
	defer closeConns(devices)
	floorTallies := make(chan streamTally, 4*n)
	floorConns, err := dialSSEFan(ctx, n, floorTallies)
	if err != nil {
		return err
	}
	defer closeConns(floorConns)
	time.Sleep(200 * time.Millisecond)

	runs := 0
	viaServer := func(words string) func() (func() error, error) {
		return func() (func() error, error) {
			runs++
			m, _ := json.Marshal(map[string]any{"type": "agent_invoke", "ts": time.Now().UnixMilli(), "request_id": fmt.Sprint("req_", runs),
				"agent_id": "bench", "message": map[string]string{"role": "user", "content": words}})
			return func() error { return nil }, devices[0].WriteMessage(websocket.TextMessage, m)
		}
	}
	viaFloor := func(words string) func() (func() error, error) {
		return func() (func() error, error) {
			body, _ := json.Marshal(map[string]any{"url": orch + "/internal/invoke",
				"body": map[string]any{"request_id": "floor", "session_id": "floor", "agent_id": "bench", "message": map[string]string{"role": "user", "content": words}}})
			done := make(chan error, 1)
			go func() {
				resp, err := fl.http.Post("http://"+fl.addr+"/ssefan/go", "application/json", bytes.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						err = fmt.Errorf("floor relay: %s", resp.Status)
					}
				}
				done <- err
			}()
			return func() error { return <-done }, nil
		}
	}

	// As fast as the orchestrator streams: events per second per device.
	k := c.ingressEvents
	var rates, floorRates []float64
	for range c.ingressRounds {
		d, _, err := streamRound(floorTallies, n, k, viaFloor(fmt.Sprint("stream ", k)))
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		floorRates = append(floorRates, float64(k)/d.Seconds())
		d, _, err = streamRound(tallies, n, k, viaServer(fmt.Sprint("stream ", k)))
		if err != nil {
			return err
		}
		rates = append(rates, float64(k)/d.Seconds())
	}
	// At a steady 1000 events/s: orchestrator → device.
	var lat, floorLat []time.Duration
	paced := fmt.Sprintf("stream %d pace 1000", c.ingressPaced)
	for range c.ingressRounds {
		_, l, err := streamRound(floorTallies, n, c.ingressPaced, viaFloor(paced))
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		floorLat = append(floorLat, l...)
		_, l, err = streamRound(tallies, n, c.ingressPaced, viaServer(paced))
		if err != nil {
			return err
		}
		lat = append(lat, l...)
	}

	name := fmt.Sprintf("Ingress → %d device(s):", n)
	floorName := fmt.Sprintf("floor: SSE → %d WebSocket(s), bare relay:", n)
	rate, floorRate := median(rates), median(floorRates)
	r.add(floorName+" events/s per device", floorRate, "/s")
	r.add(name+" events/s per device", rate, "/s").Note =
		fmt.Sprintf("one session; %d deltas a run, as fast as the orchestrator streams; median of %d runs; %.0f frames/s in all", k, c.ingressRounds, rate*float64(n))
	r.add(name+" events/s / floor", rate/floorRate, "×")
	r.add(floorName+" at 1000/s, p50", pct(floorLat, 50)/1000, "ms")
	r.add(floorName+" at 1000/s, p99", pct(floorLat, 99)/1000, "ms")
	r.add(name+" orchestrator → device at 1000/s, p50", pct(lat, 50)/1000, "ms")
	r.add(name+" orchestrator → device at 1000/s, p99", pct(lat, 99)/1000, "ms")
	r.add(name+" latency p99 / floor p99", pct(lat, 99)/pct(floorLat, 99), "×").Note =
		"the floor's runs alternate with the server's, from the same orchestrator process to the same number of devices"
	return nil
}

// streamTally is what one device got of a run.
type streamTally struct {
	events int
	lat    []time.Duration // send (the delta's text) to receipt
	doneAt time.Time
	err    error
}

// readStream tallies the runs a device sees, one streamTally per run's
// done or error, until the connection ends.
func readStream(ws *websocket.Conn, out chan<- streamTally) {
	var t streamTally
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			select {
			case out <- streamTally{err: fmt.Errorf("connection ended: %w", err)}:
			default:
			}
			return
		}
		var ev struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &ev) != nil {
			continue
		}
		switch ev.Type {
		case "delta":
			now := time.Now().UnixNano()
			if sent, err := strconv.ParseInt(ev.Text, 10, 64); err == nil {
				t.lat = append(t.lat, time.Duration(now-sent))
			}
			t.events++
		case "done":
			t.doneAt = time.Now()
			out <- t
			t = streamTally{}
		case "error":
			t.err = fmt.Errorf("%s: %s", ev.Code, ev.Message)
			out <- t
			t = streamTally{}
		}
	}
}

// streamRound starts a run of k deltas with start and waits for n
// devices to have had all of it: how long from the start until the last
// one had its done, and every delta's latency.
func streamRound(tallies <-chan streamTally, n, k int, start func() (func() error, error)) (time.Duration, []time.Duration, error) {
	t0 := time.Now()
	wait, err := start()
	if err != nil {
		return 0, nil, err
	}
	var last time.Time
	var lat []time.Duration
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for range n {
		select {
		case t := <-tallies:
			if t.err != nil {
				return 0, nil, t.err
			}
			if t.events != k {
				return 0, nil, fmt.Errorf("a device got %d of %d deltas", t.events, k)
			}
			lat = append(lat, t.lat...)
			if t.doneAt.After(last) {
				last = t.doneAt
			}
		case <-timeout.C:
			return 0, nil, fmt.Errorf("a run of %d deltas did not reach %d devices within 60s", k, n)
		}
	}
	if err := wait(); err != nil {
		return 0, nil, err
	}
	return last.Sub(t0), lat, nil
}

// dialIngress connects n devices to one session of user on /ingress/ws.
func dialIngress(ctx context.Context, s *server, user string, n int, tallies chan<- streamTally) ([]*websocket.Conn, error) {
	url := strings.Replace(s.url, "http", "ws", 1) + "/ingress/ws"
	hello, _ := json.Marshal(map[string]any{"type": "hello", "ts": time.Now().UnixMilli(), "user_id": user, "api_key": s.token,
		"client_meta": map[string]string{"app": "bench", "version": "1"}})
	var out []*websocket.Conn
	session := ""
	for range n {
		ws, err := dialWebSocket(ctx, websocket.DefaultDialer, url)
		if err != nil {
			closeConns(out)
			return nil, err
		}
		out = append(out, ws)
		var ack struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
		}
		if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
			closeConns(out)
			return nil, err
		}
		if err := ws.ReadJSON(&ack); err != nil {
			closeConns(out)
			return nil, fmt.Errorf("read hello_ack: %w", err)
		}
		if ack.Type != "hello_ack" || (session != "" && ack.SessionID != session) {
			closeConns(out)
			return nil, fmt.Errorf("hello: got %+v, want a hello_ack of session %q", ack, session)
		}
		session = ack.SessionID
		go readStream(ws, tallies)
	}
	return out, nil
}

// dialSSEFan connects n devices to the floor's relay.
func dialSSEFan(ctx context.Context, n int, tallies chan<- streamTally) ([]*websocket.Conn, error) {
	var out []*websocket.Conn
	for range n {
		ws, err := dialWebSocket(ctx, websocket.DefaultDialer, "ws://"+fl.addr+"/ssefan")
		if err != nil {
			closeConns(out)
			return nil, err
		}
		out = append(out, ws)
		go readStream(ws, tallies)
	}
	return out, nil
}

func closeConns(cs []*websocket.Conn) {
	for _, ws := range cs {
		_ = ws.Close()
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// sseFan is the floor's bare relay from an orchestrator's stream to many
// devices: POST /ssefan/go {"url", "body"} posts body to url, reads the
// answer's Server-Sent Events with go-sse (as the server does) and hands
// each event's data, as it is, to every /ssefan connection's writer
// (gorilla's usual goroutine and channel), as a text frame.
type sseFan struct {
	mu    sync.Mutex
	sends map[chan []byte]struct{}
}

func (f *sseFan) join(w http.ResponseWriter, req *http.Request, up *websocket.Upgrader) {
	ws, err := up.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	ch := make(chan []byte, 1<<16)
	f.mu.Lock()
	if f.sends == nil {
		f.sends = map[chan []byte]struct{}{}
	}
	f.sends[ch] = struct{}{}
	f.mu.Unlock()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case b := <-ch:
				if ws.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
			case <-stop:
				return
			}
		}
	}()
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			f.mu.Lock()
			delete(f.sends, ch)
			f.mu.Unlock()
			close(stop)
			_ = ws.Close()
			return
		}
	}
}

func (f *sseFan) relay(w http.ResponseWriter, req *http.Request) {
	var in struct {
		URL  string          `json:"url"`
		Body json.RawMessage `json:"body"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, in.URL, bytes.NewReader(in.Body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		b := []byte(ev.Data)
		f.mu.Lock()
		for ch := range f.sends {
			select {
			case ch <- b:
			default: // a device 65536 events behind misses them: its run fails
			}
		}
		f.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}
