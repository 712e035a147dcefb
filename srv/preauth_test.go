package srv_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// rawDial opens a WebSocket on base+path and sends nothing. A refusal
// before the upgrade comes back as its HTTP status.
func rawDial(base, path string) (*websocket.Conn, int, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+path, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode, err
		}
		return nil, 0, err
	}
	return ws, http.StatusSwitchingProtocols, nil
}

// frameHeader is the header of a final, masked client frame of n payload
// bytes. The mask key is zero, so the payload goes out as it is.
func frameHeader(op byte, n int) []byte {
	b := []byte{0x80 | op}
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, 0, 0, 0, 0)
}

// closeCode reads until the server closes ws and returns the close code
// (0 when the connection ended without one).
func closeCode(ws *websocket.Conn) int {
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			return 0
		}
	}
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestUnauthenticatedSocketsAreBounded is the outside tester's attack:
// 150 WebSockets that never log in, each sending one frame of 4 MiB - 1
// bytes. Past the cap each newcomer evicts the oldest connection still
// waiting (close 1013), every one kept is closed with 1009 as soon as its
// frame header claims more than the pre-login limit, and the server
// allocates a bounded amount of memory for all of it.
func TestUnauthenticatedSocketsAreBounded(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	const n = 150
	frame := append(frameHeader(websocket.TextMessage, 4<<20-1), make([]byte, 4<<20-1)...)
	runtime.GC()
	before := heapAllocs()

	var admitted []*websocket.Conn
	for i := range n {
		path := "/agent/ws"
		if i%2 == 1 {
			path = "/ws"
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("dial %d: %d %v (a newcomer takes the oldest one's place, never refused)", i, status, err)
		}
		admitted = append(admitted, ws)
	}
	// All come from loopback: past the per-address cap each newcomer
	// evicted the oldest still waiting, closed with 1013 (try again later).
	keep := auth.DefaultMaxPendingPerAddr
	for i, ws := range admitted[:n-keep] {
		if c := closeCode(ws); c != websocket.CloseTryAgainLater {
			t.Errorf("connection %d of the flood: close %d, want 1013 (evicted for a newer one)", i, c)
		}
		ws.Close()
	}
	admitted = admitted[n-keep:]
	codes := make([]int, len(admitted))
	var wg sync.WaitGroup
	for i, ws := range admitted {
		wg.Go(func() {
			defer ws.Close()
			nc := ws.NetConn()
			_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = nc.Write(frame) }() // the server may close before taking it all
			codes[i] = closeCode(ws)
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != websocket.CloseMessageTooBig {
			t.Errorf("connection %d: close %d, want 1009 (frame over the pre-login limit)", i, c)
		}
	}
	grew := heapAllocs() - before
	t.Logf("allocated %d KiB", grew>>10)
	if grew > 32<<20 {
		t.Errorf("the server allocated %d MiB for %d unauthenticated connections", grew>>20, n)
	}
	// The places are given back: a new connection is admitted and logs in.
	c, err := wstest.Dial(base, tokA, "after", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Login.GetSuccess() {
		t.Errorf("login after the attack: %v", c.Login)
	}
}

// TestPendingCap: the cap counts connections from before their upgrade
// until they log in or end, on both WebSocket endpoints together; past it
// a newcomer takes the place of the oldest still waiting (of its address,
// else of all), which is closed with 1013.
func TestPendingCap(t *testing.T) {
	pending := auth.NewPending(10, 3)
	_, base := newGuarded(t, srv.Options{Pending: pending})
	var held []*websocket.Conn
	dial := func(path string) *websocket.Conn {
		t.Helper()
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("%s: %d %v", path, status, err)
		}
		held = append(held, ws)
		return ws
	}
	for _, path := range []string{"/ws", "/agent/ws", "/ws"} {
		dial(path)
	}
	// Past the address's cap: the oldest goes.
	dial("/ws")
	if c := closeCode(held[0]); c != websocket.CloseTryAgainLater {
		t.Errorf("the oldest past the cap: close %d, want 1013", c)
	}
	if n := pending.Len(); n != 3 {
		t.Errorf("%d connections counted as waiting to log in, want 3", n)
	}
	// A connection that logs in gives its place back...
	if err := held[1].WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"`+tokA+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := held[1].ReadMessage(); err != nil || !strings.Contains(string(b), "relay.joined") {
		t.Fatalf("join: %s %v", b, err)
	}
	if n := pending.Len(); n != 2 {
		t.Errorf("after a join: %d connections counted as waiting to log in, want 2", n)
	}
	// ...and so does one that ends.
	held[2].Close()
	for pending.Len() == 2 {
		time.Sleep(5 * time.Millisecond) // until the server has seen the close
	}
	// Logged-in connections never count.
	login(t, base, tokA, "in")
	// The login's place is given back as the server marks it active, just
	// after the welcome frame is queued.
	for deadline := time.Now().Add(5 * time.Second); pending.Len() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := pending.Len(); n != 1 {
		t.Errorf("%d connections counted as waiting to log in, want 1", n)
	}
	for _, ws := range held {
		ws.Close()
	}

	// Past the server's cap, the oldest of all goes.
	_, base2 := newGuarded(t, srv.Options{Pending: auth.NewPending(2, 10)})
	var first *websocket.Conn
	for i := range 3 {
		ws, _, err := rawDial(base2, "/ws")
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if i == 0 {
			first = ws
		}
	}
	if c := closeCode(first); c != websocket.CloseTryAgainLater {
		t.Errorf("the oldest past the server's cap: close %d, want 1013", c)
	}
}

// TestFloodCannotKeepTheOwnerOut: a local program holding as many
// WebSockets waiting to log in as loopback may have (and Connect calls
// without a token) does not keep the person's own page out: its login
// takes the oldest one's place.
func TestFloodCannotKeepTheOwnerOut(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	for i := range auth.DefaultMaxPendingPerAddr {
		path := "/ws"
		if i%2 == 1 {
			path = "/agent/ws"
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("flood %d: %d %v", i, status, err)
		}
		defer ws.Close()
	}
	for _, path := range []string{"/ws", "/agent/ws"} {
		if path == "/ws" {
			c, err := wstest.Dial(base, tokA, "owner", nil)
			if err != nil {
				t.Fatalf("the owner's page on /ws: %v", err)
			}
			if !c.Login.GetSuccess() {
				t.Errorf("the owner's login: %v", c.Login)
			}
			c.Close()
			continue
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("the owner's page on %s: %d %v", path, status, err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host","token":"`+tokA+`"}}`)); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.ReadMessage(); err != nil || !strings.Contains(string(b), "relay.joined") {
			t.Errorf("the owner's host join: %s %v", b, err)
		}
		ws.Close()
	}
}

// TestAgentWSFrameLimitBeforeJoin: before relay.join, /agent/ws takes
// frames of the same small size as /ws before UserLogin; the close comes
// from the frame's header, before its payload is sent.
func TestAgentWSFrameLimitBeforeJoin(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	for _, path := range []string{"/agent/ws", "/ws"} {
		ws, _, err := rawDial(base, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.NetConn().Write(frameHeader(websocket.TextMessage, 100<<10)); err != nil {
			t.Fatal(err)
		}
		if c := closeCode(ws); c != websocket.CloseMessageTooBig {
			t.Errorf("%s: a 100 KiB frame before login closed with %d, want 1009", path, c)
		}
		ws.Close()
	}
	// After the join the relay's own limit applies.
	a := joinAgent(t, base, tokA, "default")
	a.sendJSON(`{"v":"mvp-0.2","type":"agent.message","id":"big","payload":{"text":"` + strings.Repeat("x", 100<<10) + `"}}`)
	a.expectError("NO_ACTIVE_SPEC", "big")
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// postConnect sends a Connect unary call with a binary protobuf body.
func postConnect(t *testing.T, base, path string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/proto")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestGzipBombOnConnect: a gzip-compressed body that inflates far beyond
// the message limit costs the server only the limit, token or not, and a
// wrong token in the header is refused before the body is touched.
func TestGzipBombOnConnect(t *testing.T) {
	lim := auth.NewLimiter(1_000_000, time.Minute)
	_, base := newGuarded(t, srv.Options{Limiter: lim})
	const inflated = 32 << 20
	bomb := gzipped(t, make([]byte, inflated))
	size := fmt.Sprint(inflated)
	const path = "/agentassistproto.SrvAgentAssistControl/CancelRequest"
	gz := map[string]string{"Content-Encoding": "gzip"}
	with := func(k, v string) map[string]string {
		return map[string]string{"Content-Encoding": "gzip", k: v}
	}

	code, body := postConnect(t, base, path, bomb, with(auth.TokenHeader, "wrong-token-123456"))
	if code != http.StatusUnauthorized || !strings.Contains(body, "unauthenticated") {
		t.Errorf("bomb with a wrong header token: %d %s, want 401 unauthenticated", code, body)
	}
	for name, h := range map[string]map[string]string{
		"no token":           gz,
		"the token":          with(auth.TokenHeader, tokA),
		"the token (bearer)": with("Authorization", "Bearer "+tokA),
	} {
		code, body := postConnect(t, base, path, bomb, h)
		if !strings.Contains(body, "resource_exhausted") || strings.Contains(body, size) {
			t.Errorf("bomb with %s: %d %s: want resource_exhausted without inflating all %s bytes", name, code, body, size)
		}
	}
	// Compressed messages within the limits still work, the token in the
	// message (older clients) or in the header.
	msg, _ := proto.Marshal(&pb.CancelRequestRequest{UserToken: tokA, ID: "no-such-request"})
	for name, h := range map[string]map[string]string{"in the message": gz, "in the header": with(auth.TokenHeader, tokB)} {
		code, body := postConnect(t, base, path, gzipped(t, msg), h)
		if code != http.StatusBadRequest || !strings.Contains(body, "failed_precondition") {
			t.Errorf("compressed call, token %s: %d %s", name, code, body)
		}
	}

	// Bombs without a token count as failed logins, before they are
	// answered: past the budget, the next failure is held back. (Each on
	// a connection of its own, so nothing orders them but the server.)
	lim2 := auth.NewLimiter(2, time.Minute)
	var holds atomic.Int32
	lim2.Hold = func(time.Duration, <-chan struct{}) { holds.Add(1) }
	_, base2 := newGuarded(t, srv.Options{Limiter: lim2})
	for range 2 {
		postConnect(t, base2, path, bomb, with("Connection", "close"))
	}
	wrong := with(auth.TokenHeader, "wrong-token-123456")
	wrong["Connection"] = "close"
	if code, _ := postConnect(t, base2, path, bomb, wrong); code != http.StatusUnauthorized || holds.Load() != 1 {
		t.Errorf("a wrong token after two bombs: %d, held back %d times, want 401 held once", code, holds.Load())
	}
}

// TestBigMessagesNeedTheHeaderToken: a message whose token is only inside
// it is read with the small pre-login limit; with the token in a header
// the full message limit applies.
func TestBigMessagesNeedTheHeaderToken(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	const path = "/agentassistproto.SrvAgentAssistReply/AskQuestionReply"
	msg, _ := proto.Marshal(&pb.AskQuestionReplyRequest{UserToken: tokA, Response: &pb.AskQuestionResponse{
		ID: "no-such-request", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: strings.Repeat("a", 200<<10)}}},
	}})
	code, body := postConnect(t, base, path, msg, nil)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "resource_exhausted") || !strings.Contains(body, auth.TokenHeader) {
		t.Errorf("200 KiB with the token only inside: %d %.300s", code, body)
	}
	code, body = postConnect(t, base, path, msg, map[string]string{auth.TokenHeader: tokA})
	if code != http.StatusBadRequest || !strings.Contains(body, "failed_precondition") {
		t.Errorf("200 KiB with the header token: %d %.300s", code, body)
	}
}

// TestSlowBodyIsCut: a Connect body that trickles in (one byte at a time)
// is cut off at the body deadline, as slow headers are.
func TestSlowBodyIsCut(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	s, base := newGuarded(t, srv.Options{BodyTimeout: bodyTimeout})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /agentassistproto.SrvAgentAssist/AskQuestion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/proto\r\nContent-Length: 100000\r\n\r\n")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := conn.Write([]byte{0x0a}); err != nil {
					return
				}
			}
		}
	})
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the server never answered the slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "deadline_exceeded") {
		t.Errorf("slow body: %d %s", resp.StatusCode, b)
	}

	// A body that arrived in time leaves the call to wait for its answer
	// as long as it takes, past the body deadline.
	c := login(t, base, tokA, "answers")
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/agentassistproto.SrvAgentAssist/AskQuestion",
			strings.NewReader(`{"UserToken":"`+tokA+`","ID":"slow-answer","Request":{"Question":"?"}}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%d %s", resp.StatusCode, b)
			}
		}
		done <- err
	}()
	expect(t, c, "AskQuestion")
	time.Sleep(3 * bodyTimeout) // the body deadline, had it stayed, would have passed
	if err := c.Send(wstest.TextReply("slow-answer", "late but fine")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("a call answered after the body deadline: %v", err)
	}
	_ = s
}

// heldBody is the body heldConnectCall sends.
var heldBody = append([]byte{0x0a}, make([]byte, 64<<10)...)

// heldConnectCall starts a Connect call without a header token and sends
// all of its body but the last byte, so the server holds what it has read
// while it waits for the rest. It returns the connection and the status
// of a refusal that came at once (0: the call is being read).
func heldConnectCall(t *testing.T, base string, size int) (net.Conn, int) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Error(err)
		return nil, -1
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /agentassistproto.SrvAgentAssist/AskQuestion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/proto\r\nContent-Length: %d\r\n\r\n", size)
	// A refusal may close the connection while the body is still being
	// written; its answer is read all the same.
	_, _ = conn.Write(heldBody[:size-1])
	_ = conn.SetReadDeadline(time.Now().Add(time.Second)) // a refusal comes at once
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			_ = conn.SetReadDeadline(time.Time{})
			return conn, 0
		}
		t.Errorf("reading the answer: %v", err)
		return conn, -1
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "resource_exhausted") && !strings.Contains(string(b), "unavailable") {
		t.Errorf("refused call: %d %s, want a Connect error", resp.StatusCode, b)
	}
	return conn, resp.StatusCode
}

// TestUnauthenticatedConnectCallsAreBounded: Connect calls without a
// token in their header are unauthenticated until the token inside their
// message has been read, and each may hold up to the small message limit
// meanwhile. They count against the same caps as WebSockets that have not
// logged in (past the cap the oldest is evicted): 300 such calls sending
// 64 KiB - 1 byte each used to be read all at once (3000 of them held 600 MB; each call read costs about four
// times its size, so the cap is what bounds the memory).
func TestUnauthenticatedConnectCallsAreBounded(t *testing.T) {
	pending := auth.NewPending(0, 0)
	_, base := newGuarded(t, srv.Options{Pending: pending})
	const n = 300
	refused := map[int]int{}
	statuses := make([]int, n)
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], statuses[i] = heldConnectCall(t, base, 64<<10) })
	}
	wg.Wait()
	for _, status := range statuses {
		if status != 0 {
			refused[status]++
		}
	}
	// Each newcomer past the address's cap took the place of the oldest
	// call still being read, which was answered 503 (unavailable) at once:
	// only the last 64 are still being read.
	if len(refused) > 1 || refused[http.StatusServiceUnavailable] > n-auth.DefaultMaxPendingPerAddr {
		t.Errorf("refused %v: want only evicted calls, answered 503", refused)
	}
	var held atomic.Int32
	for i, conn := range conns {
		if statuses[i] != 0 {
			continue
		}
		wg.Go(func() {
			// Well within the body's own deadline (30 s).
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				held.Add(1) // still being read: no answer
				return
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "unavailable") {
				t.Errorf("evicted call: %d %s, want 503 unavailable", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	if n := int(held.Load()); n != auth.DefaultMaxPendingPerAddr || pending.Len() != auth.DefaultMaxPendingPerAddr {
		t.Errorf("%d calls still being read, %d counted: want %d", n, pending.Len(), auth.DefaultMaxPendingPerAddr)
	}
	// A call with the token in its header is authenticated before its
	// body is read, and never counts.
	msg, _ := proto.Marshal(&pb.CancelRequestRequest{ID: "no-such-request"})
	if code, body := postConnect(t, base, "/agentassistproto.SrvAgentAssistControl/CancelRequest", msg, map[string]string{auth.TokenHeader: tokA}); code != http.StatusBadRequest || !strings.Contains(body, "failed_precondition") {
		t.Errorf("a call with the header token during the flood: %d %s", code, body)
	}
}

// TestConnectCallGivesItsPlaceBack: a call without a header token counts
// until its token has been read and found valid (an older client's call
// then waits for its answer without holding a place) or until it ends.
func TestConnectCallGivesItsPlaceBack(t *testing.T) {
	pending := auth.NewPending(10, 1)
	_, base := newGuarded(t, srv.Options{Pending: pending})
	conn, status := heldConnectCall(t, base, 1000)
	if status != 0 {
		t.Fatalf("the first call was refused: %d", status)
	}
	// One budget for calls and WebSockets: a newcomer takes the place of
	// the call, which is answered 503 at once.
	ws, status, err := rawDial(base, "/ws")
	if err != nil {
		t.Fatalf("a WebSocket while the call is unauthenticated: %d %v", status, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the call whose place was taken: %v %v, want 503", resp, err)
	}
	ws.Close()
	conn.Close()
	for deadline := time.Now().Add(5 * time.Second); pending.Len() != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := pending.Len(); n != 0 {
		t.Fatalf("%d places still taken after the call ended", n)
	}
	// An older client's question (token inside the message) waits for its
	// answer without holding a place.
	c := login(t, base, tokA, "answers")
	done := make(chan error, 1)
	go func() {
		msg, _ := proto.Marshal(&pb.AskQuestionRequest{UserToken: tokA, ID: "old-client", Request: &pb.McpAskQuestionRequest{Question: "?"}})
		code, body := postConnect(t, base, "/agentassistproto.SrvAgentAssist/AskQuestion", msg, nil)
		if code != http.StatusOK {
			done <- fmt.Errorf("%d %s", code, body)
		}
		done <- nil
	}()
	expect(t, c, "AskQuestion")
	if n := pending.Len(); n != 0 {
		t.Errorf("a call whose token was read holds %d places while it waits", n)
	}
	if _, status := heldConnectCall(t, base, 1000); status != 0 {
		t.Errorf("another call while an authenticated one waits: %d", status)
	}
	if err := c.Send(wstest.TextReply("old-client", "fine")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}
