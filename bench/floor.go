package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// The floor of this run: what the transports cost with no work at all.
var floorWS, floorConnect float64

// floor measures a bare gorilla WebSocket echo and a bare connect-go unary
// call over HTTP/1.1 on loopback. The floor servers run in a process of
// their own, as agentassistant-srv does, so both pay the same hops.
func floor(ctx context.Context, c config, r *report) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-serve-floor") // #nosec G204 -- this very binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("floor server: %w", err)
	}
	addr = strings.TrimSpace(addr)
	base := "http://" + addr

	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/echo", nil)
	if resp != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return err
	}
	defer func() { _ = ws.Close() }()
	msg := make([]byte, 64)
	ds, err := timed(c.seq, 200, func(int) error {
		if err := ws.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			return err
		}
		_, _, err := ws.ReadMessage()
		return err
	})
	if err != nil {
		return err
	}
	floorWS = pct(ds, 50)
	r.add("floor: WebSocket echo p50", floorWS, "µs")
	r.add("floor: WebSocket echo p99", pct(ds, 99), "µs")

	client := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, base)
	ds, err = timed(c.seq, 200, func(i int) error {
		_, err := client.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint(i)})
		return err
	})
	if err != nil {
		return err
	}
	floorConnect = pct(ds, 50)
	r.add("floor: connect-go unary (HTTP/1.1) p50", floorConnect, "µs")
	r.add("floor: connect-go unary (HTTP/1.1) p99", pct(ds, 99), "µs")
	return nil
}

// runFloorServer serves the floor endpoints until killed.
func runFloorServer() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
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

type noop struct{}

func (noop) AskQuestion(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	return &pb.AskQuestionResponse{}, nil
}

func (noop) TaskFinish(context.Context, *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	return &pb.TaskFinishResponse{}, nil
}
