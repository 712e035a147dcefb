//go:build unix

package ingress_test

import (
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/ingress"
)

// TestResumeSlowReader: a device that comes back having missed more
// events than a connection's default send queue holds (1,000 of a run's
// deltas, 12 MiB, within a replay window of 16 MiB) gets them all, in
// order, even when the socket takes little of them at once (here a
// receive buffer of 4 KiB and no reading until the hello is done; on a
// slow network, the same): the replay must not count the device as too
// slow and drop it, or it could never resume, each try dropped the same.
func TestResumeSlowReader(t *testing.T) {
	const n, size = 1000, 12 << 10
	e := withFake(t, fakeOrchestrator(t, streaming(n, size)), ingress.Options{ReplayBytes: 16 << 20}, ingress.HTTPOptions{})
	a := dial(t, e.url)
	a.hello("u1", "")
	a.send(appendix(invokeA, a.sess, ""))
	a.expect("run_started")
	for range n {
		a.expect("delta")
	}
	a.expect("done")

	// b's socket takes little and b reads nothing until the server is
	// done with its hello: the replay waits in b's send queue.
	nd := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	d := websocket.Dialer{NetDialContext: nd.DialContext}
	ws, _, err := d.Dial(strings.Replace(e.url, "http", "ws", 1)+"/ingress/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	hello := fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u1","api_key":%q,"session_id":%q,"last_seq":0}`, tok, a.sess)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	for seen := false; ; runtime.Gosched() {
		h := healthOf(t, e.url)
		states, _ := h["ingressStates"].(map[string]any)
		conns := h["ingressConnections"].(float64)
		if states["ACTIVE"] == 2.0 || seen && conns < 2 {
			break // hello done, or b dropped
		}
		seen = seen || conns == 2
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ack map[string]any
	if _, b, err := ws.ReadMessage(); err != nil || json.Unmarshal(b, &ack) != nil || ack["type"] != "hello_ack" {
		t.Fatalf("hello_ack: %s %v", b, err)
	}
	want := int(ack["replayed"].(float64))
	if want != n+2 || ack["gap"] != false && ack["gap"] != nil {
		t.Fatalf("hello_ack %v: want %d events replayed, no gap", ack, n+2)
	}
	last := 0.0
	for i := range want {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d replayed events: %v", i, want, err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if seq := ev["seq"].(float64); seq != last+1 {
			t.Fatalf("replayed seq %v after %v", seq, last)
		}
		last = ev["seq"].(float64)
	}
}
