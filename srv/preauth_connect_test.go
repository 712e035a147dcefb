package srv_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// What a Connect call may cost before its token is checked (the WebSocket
// side is in preauth_test.go).

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
	inMsg, _ := proto.Marshal(&pb.CancelRequestRequest{UserToken: tokA, ID: "no-such-request"})
	noTok, _ := proto.Marshal(&pb.CancelRequestRequest{ID: "no-such-request"})
	for name, c := range map[string]struct {
		msg []byte
		h   map[string]string
	}{"in the message": {inMsg, gz}, "in the header": {noTok, with(auth.TokenHeader, tokB)}} {
		code, body := postConnect(t, base, path, gzipped(t, c.msg), c.h)
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
	// An older client cannot send the header: the server's owner can
	// raise the limit, and the message says with which setting.
	if code != http.StatusTooManyRequests || !strings.Contains(body, "resource_exhausted") || !strings.Contains(body, auth.TokenHeader) ||
		!strings.Contains(body, "max_unauthenticated_message_bytes") {
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
	// Not a wait for something to happen: time must pass for the check.
	// The body deadline is the socket's, on the real clock (no synctest
	// over a real listener); had it stayed, it would have passed by now.
	time.Sleep(3 * bodyTimeout)
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
