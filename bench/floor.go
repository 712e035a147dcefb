package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// The floor of this run: what the transports cost with no work at all.
var floorWS, floorConnect float64

// floorServer is the bare floor process, up for the whole run so that
// other steps can measure the floor alongside what they measure.
type floorServer struct {
	addr    string
	proc    *child
	ws      *websocket.Conn
	connect agentassistprotoconnect.SrvAgentAssistClient
	http    *http.Client
}

var fl *floorServer

func (f *floorServer) stop() {
	_ = f.ws.Close()
	f.proc.stop()
}

var echoMsg = make([]byte, 64)

// echo is one WebSocket round trip on the floor.
func (f *floorServer) echo(int) error {
	if err := f.ws.WriteMessage(websocket.BinaryMessage, echoMsg); err != nil {
		return err
	}
	_, _, err := f.ws.ReadMessage()
	return err
}

// unary is one connect-go call on the floor.
func (f *floorServer) unary(ctx context.Context, i int) error {
	_, err := f.connect.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint(i)})
	return err
}

// startFloor starts the floor process: this very binary, serving a bare
// gorilla WebSocket echo, a bare connect-go handler and a bare broadcast.
// It runs in a process of its own, as agentassistant-srv does, so both pay
// the same hops.
func startFloor(ctx context.Context) (*floorServer, error) {
	proc, err := startChild(ctx, nil, "-serve-floor")
	if err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	f := &floorServer{proc: proc, addr: proc.addr}
	ws, err := dialWebSocket(ctx, websocket.DefaultDialer, "ws://"+f.addr+"/echo")
	if err != nil {
		proc.stop()
		return nil, err
	}
	f.ws = ws
	f.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	f.connect = agentassistprotoconnect.NewSrvAgentAssistClient(f.http, "http://"+f.addr)
	return f, nil
}

// floor measures a bare gorilla WebSocket echo and a bare connect-go unary
// call over HTTP/1.1 on loopback, and leaves the floor process running for
// the other steps.
func floor(ctx context.Context, c config, r *report) error {
	var err error
	if fl, err = startFloor(ctx); err != nil {
		return err
	}
	ds, err := timed(c.seq, 200, fl.echo)
	if err != nil {
		return err
	}
	floorWS = pct(ds, 50)
	r.add("floor: WebSocket echo p50", floorWS, "µs")
	r.add("floor: WebSocket echo p99", pct(ds, 99), "µs")
	ds, err = timed(c.seq, 200, func(i int) error { return fl.unary(ctx, i) })
	if err != nil {
		return err
	}
	floorConnect = pct(ds, 50)
	r.add("floor: connect-go unary (HTTP/1.1) p50", floorConnect, "µs")
	r.add("floor: connect-go unary (HTTP/1.1) p99", pct(ds, 99), "µs")
	return nil
}

// memFloor is a floor process's memory around n idle connections.
type memFloor struct{ perKiB, back, keptMiB float64 }

// newMemFloor takes RSS (KiB) at the start, with the n connections and
// after they left.
func newMemFloor(n, rss0, rss1, rss2 int) memFloor {
	return memFloor{float64(rss1-rss0) / float64(n), float64(rss2) / float64(rss0), float64(rss2-rss0) / 1024}
}

func (m memFloor) report(r *report, name string, n int) {
	r.add(fmt.Sprintf("floor: %s, RSS per idle connection (%d)", name, n), m.perKiB, "KiB")
	r.add(fmt.Sprintf("floor: %s, RSS after they all left, vs start", name), m.back, "×").Note =
		fmt.Sprintf("%.1f MiB kept above its start", m.keptMiB)
}

// idleFloor is the memory floor for idle connections: a fresh floor
// process (gorilla's usual server: a goroutine and gorilla's buffers per
// connection) holding n connections that each sent a login-sized frame and
// got it back; its RSS per connection, and after they leave vs its start.
func idleFloor(ctx context.Context, n int) (m memFloor, err error) {
	f, err := startFloor(ctx)
	if err != nil {
		return m, err
	}
	defer f.stop()
	pid := f.proc.cmd.Process.Pid
	time.Sleep(time.Second)
	rss0, err := rssKB(pid)
	if err != nil {
		return m, err
	}
	conns := make([]*websocket.Conn, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	msg := make([]byte, 60)
	for i := range conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ws, derr := dialWebSocket(ctx, clientDialer, "ws://"+f.addr+"/echo")
			if derr == nil {
				if derr = ws.WriteMessage(websocket.BinaryMessage, msg); derr == nil {
					_, _, derr = ws.ReadMessage()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if derr != nil && err == nil {
				err = derr
			}
			conns[i] = ws
		})
	}
	wg.Wait()
	defer func() {
		for _, ws := range conns {
			if ws != nil {
				_ = ws.NetConn().Close()
			}
		}
	}()
	if err != nil {
		return m, err
	}
	time.Sleep(2 * time.Second)
	rss1, _ := rssKB(pid)
	for i, ws := range conns {
		_ = ws.NetConn().Close()
		conns[i] = nil
	}
	// As long as the server is given: until within 1.2× or 20 s.
	var rss2 int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if rss2, _ = rssKB(pid); float64(rss2) <= 1.2*float64(rss0) {
			break
		}
	}
	return newMemFloor(n, rss0, rss1, rss2), nil
}

// fanFrame is what the floor broadcasts: an AskQuestion frame like the
// server's, so the clients do the same work for both.
func fanFrame() []byte {
	b, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "AskQuestion", Seq: 1, AskQuestionRequest: &pb.AskQuestionRequest{
		ID: "fan-0", UserToken: "bench-token-0123456789abcdef", Request: &pb.McpAskQuestionRequest{Question: "all of you?", Timeout: 60}}})
	return b
}

// floorDevices are a floor's connections, each with the writer goroutine
// and channel of gorilla's own hub example.
type floorDevices struct {
	mu    sync.Mutex
	sends []chan []byte
}

// join serves one connection until it ends, handing each frame it reads
// to onRead (when set) under mu.
func (f *floorDevices) join(w http.ResponseWriter, req *http.Request, up *websocket.Upgrader, onRead func([]byte)) {
	ws, err := up.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	ch := make(chan []byte, 16)
	f.mu.Lock()
	f.sends = append(f.sends, ch)
	f.mu.Unlock()
	go func() {
		for b := range ch {
			if ws.WriteMessage(websocket.BinaryMessage, b) != nil {
				return
			}
		}
	}()
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			_ = ws.Close()
			return
		}
		if onRead != nil {
			f.mu.Lock()
			onRead(b)
			f.mu.Unlock()
		}
	}
}

// sendAll hands b to every connection's writer that has room for it; the
// caller holds mu.
func (f *floorDevices) sendAll(b []byte) {
	for _, ch := range f.sends {
		select {
		case ch <- b:
		default:
		}
	}
}

// fanFloor is the bare broadcast: POST /fan/go hands one frame to every
// /fan connection.
type fanFloor struct{ floorDevices }

func (f *fanFloor) broadcast(w http.ResponseWriter, _ *http.Request) {
	b := fanFrame()
	f.mu.Lock()
	f.sendAll(b)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// askFloor is the floor under a question fanned out to many devices, one
// of which answers: what any server must do for it, and nothing else.
// A Connect-shaped POST /fanask/go (a protobuf AskQuestionRequest) writes
// one AskQuestion frame to every /fanask connection and answers with the
// first reply any of them sends back.
type askFloor struct {
	floorDevices
	waiting chan []byte // the POST waiting for its first reply; nil when none; under mu
}

func (f *askFloor) join(w http.ResponseWriter, req *http.Request, up *websocket.Upgrader) {
	f.floorDevices.join(w, req, up, func(b []byte) {
		if f.waiting != nil {
			f.waiting <- b
			f.waiting = nil
		}
	})
}

func (f *askFloor) ask(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var q pb.AskQuestionRequest
	if err == nil {
		err = proto.Unmarshal(body, &q)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, err := f.relay(&q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusGatewayTimeout)
		return
	}
	w.Header().Set("Content-Type", "application/proto")
	_, _ = w.Write(b)
}

// relay writes q as an AskQuestion frame to every device and returns the
// first reply any of them sends back.
func (f *askFloor) relay(q *pb.AskQuestionRequest) ([]byte, error) {
	frame, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "AskQuestion", Seq: 1, AskQuestionRequest: q})
	reply := make(chan []byte, 1)
	f.mu.Lock()
	f.waiting = reply
	f.sendAll(frame)
	f.mu.Unlock()
	select {
	case b := <-reply:
		return b, nil
	case <-time.After(10 * time.Second):
		return nil, errors.New("no reply")
	}
}

// askConnect is the floor of one ask_question: a connect-go AskQuestion
// handler that does what the server's does and nothing else: write the
// question to the devices (gorilla, a writer goroutine each) and answer
// with the first reply. No token, no store, no bookkeeping.
type askConnect struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
	f *askFloor
}

func (a askConnect) AskQuestion(_ context.Context, q *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	b, err := a.f.relay(q)
	if err != nil {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	var m pb.WebsocketMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return m.GetAskQuestionResponse(), nil
}

// runFloorServer serves the floor endpoints until killed.
func runFloorServer() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	var fan fanFloor
	mux.HandleFunc("/fan", func(w http.ResponseWriter, req *http.Request) { fan.join(w, req, &up, nil) })
	mux.HandleFunc("POST /fan/go", fan.broadcast)
	var fanAsk askFloor
	mux.HandleFunc("/fanask", func(w http.ResponseWriter, req *http.Request) { fanAsk.join(w, req, &up) })
	mux.HandleFunc("POST /fanask/go", fanAsk.ask)
	var one askFloor
	mux.HandleFunc("/askdev", func(w http.ResponseWriter, req *http.Request) { one.join(w, req, &up) })
	path, h := agentassistprotoconnect.NewSrvAgentAssistHandler(askConnect{f: &one}, connect.WithCompressMinBytes(rpc.CompressMinBytes))
	mux.Handle("/ask"+path, http.StripPrefix("/ask", h))
	var sf sseFan
	mux.HandleFunc("/ssefan", func(w http.ResponseWriter, req *http.Request) { sf.join(w, req, &up) })
	mux.HandleFunc("POST /ssefan/go", sf.relay)
	mux.HandleFunc("/echo", func(w http.ResponseWriter, req *http.Request) {
		ws, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.Close() }()
		for {
			t, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if ws.WriteMessage(t, b) != nil {
				return
			}
		}
	})
	// The same compression threshold as the server: the floor is the
	// transport, not gzip.
	mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(noop{}, connect.WithCompressMinBytes(rpc.CompressMinBytes)))
	fmt.Println(ln.Addr().String())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return hs.Serve(ln)
}

type noop struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
}

func (noop) AskQuestion(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	return &pb.AskQuestionResponse{}, nil
}

func (noop) TaskFinish(context.Context, *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	return &pb.TaskFinishResponse{}, nil
}
