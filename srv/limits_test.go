package srv_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// Attack tests of the limits: oversized frames, slowloris, the login
// limit, the connection cap (SECURITY.md, "How we check").

func TestOversizedOnWS(t *testing.T) {
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{MaxFrame: 256 << 10}})
	// Before login the bound is 64 KiB.
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.BinaryMessage, make([]byte, 100<<10))
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Errorf("100 KiB before login: %v", err)
	}
	// After login, MaxFrame.
	c := login(t, base, tokA, "big")
	other := login(t, base, tokA, "other")
	_ = c.SendRaw(websocket.BinaryMessage, make([]byte, 300<<10))
	err, closed := c.Closed(3 * time.Second)
	if !closed || !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Errorf("300 KiB after login: %v %v", err, closed)
	}
	if err := other.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
		t.Fatal(err)
	}
	expect(t, other, "GetOnlineUsers")

	// A Connect message over the limit.
	_, base2 := newGuarded(t, srv.Options{RPC: rpcOpts(64 << 10)})
	body := fmt.Sprintf(`{"UserToken":%q,"Request":{"Question":%q}}`, tokA, strings.Repeat("q", 100<<10))
	resp, err := http.Post(base2+"/agentassistproto.SrvAgentAssist/AskQuestion", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "resource_exhausted") {
		t.Errorf("oversized Connect message: %d %s", resp.StatusCode, b)
	}
}

// TestSlowloris: headers that trickle in are cut off at ReadHeaderTimeout.
func TestSlowloris(t *testing.T) {
	s, _ := newGuarded(t, srv.Options{})
	hs := srv.NewHTTPServer(s.Handler(), srv.HTTPOptions{ReadHeaderTimeout: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server closing the connection ends the read; the headers keep
	// trickling until then, for far longer than the timeout.
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range 400 {
		select {
		case <-closed:
			return
		case <-tick.C:
			_, _ = conn.Write([]byte("X-Slow: 1\r\n"))
		}
	}
	t.Error("slow headers kept the connection open through 400 header lines, 20 s")
}

// TestFailedLoginLimit: past an address's budget of failed logins, each
// further failure is answered late; the right token is never refused nor
// delayed, on any surface, and every loopback address (any local program
// can use 127.0.0.2) spends the same budget.
func TestFailedLoginLimit(t *testing.T) {
	lim := auth.NewLimiter(3, time.Minute)
	held := make(chan time.Duration, 16)
	release := make(chan struct{})
	lim.Hold = func(d time.Duration, done <-chan struct{}) {
		held <- d
		select {
		case <-release:
		case <-done:
		}
	}
	_, base := newGuarded(t, srv.Options{Limiter: lim})
	for i := range 3 {
		c, err := wstest.Dial(base, "wrong-token-"+fmt.Sprint(i), "x", nil)
		if err != nil || c.Login.GetSuccess() {
			t.Fatalf("attempt %d: %v", i, err)
		}
		c.Close()
	}
	if len(held) != 0 {
		t.Fatal("failures within the budget were held back")
	}

	// The budget is spent; the right token works at once everywhere.
	c, err := wstest.Dial(base, tokA, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Login.GetSuccess() {
		t.Errorf("/ws login with the token after the budget: %v", c.Login)
	}
	c.Close()
	for _, header := range []bool{false, true} {
		code, body := connectCall(t, base, "/agentassistproto.SrvAgentAssistControl/CancelRequest", tokA, header)
		if code != http.StatusBadRequest || !strings.Contains(body, "failed_precondition") {
			t.Errorf("Connect with the token (header=%v) after the budget: %d %s", header, code, body)
		}
	}
	a := dialAgent(t, base)
	a.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"` + tokA + `"}}`)
	a.expect("relay.joined")

	// A wrong token from another loopback address is held back, and the
	// right one from that address is answered meanwhile.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer other.CloseIdleConnections()
	get := func(tok string) int {
		resp, err := other.Get(base + "/health?token=" + tok)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := make(chan int, 1)
	go func() { wrong <- get("wrong-token-0000") }()
	select {
	case d := <-held:
		if d <= 0 {
			t.Errorf("held back for %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failure from 127.0.0.2 past the budget spent from 127.0.0.1 was not held back")
	}
	if code := get(tokA); code != http.StatusOK {
		t.Errorf("/health with the token from 127.0.0.2 while a failure is held: %d", code)
	}
	select {
	case code := <-wrong:
		t.Fatalf("the held failure was answered (%d) before its release", code)
	default:
	}
	close(release)
	if code := <-wrong; code != http.StatusUnauthorized {
		t.Errorf("the held failure: %d, want 401", code)
	}

	// Every surface holds its failures back the same way.
	w, err := wstest.Dial(base, "wrong-token-ws", "x", nil)
	if err != nil || w.Login.GetSuccess() {
		t.Fatalf("/ws wrong token: %v %v", err, w.Login)
	}
	w.Close()
	b := dialAgent(t, base)
	b.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"wrong-token-relay"}}`)
	b.expectError(wire.InvalidMessage, "j")
	for _, header := range []bool{false, true} {
		if code, body := connectCall(t, base, "/agentassistproto.SrvAgentAssistControl/CancelRequest", "wrong-token-rpc", header); code != http.StatusUnauthorized {
			t.Errorf("Connect wrong token (header=%v): %d %s", header, code, body)
		}
	}
	if n := len(held); n != 4 {
		t.Errorf("%d of 4 failures on /ws, /agent/ws and Connect were held back", n)
	}
}

func TestConnectionCapPerToken(t *testing.T) {
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{MaxPerToken: 3}})
	for i := range 3 {
		login(t, base, tokA, fmt.Sprint("dev", i))
	}
	c, err := wstest.Dial(base, tokA, "one-too-many", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Login.GetSuccess() || !strings.Contains(c.Login.GetErrorMessage(), "too many connections") {
		t.Errorf("fourth connection: %v", c.Login)
	}
	login(t, base, tokB, "another room is not affected")
}
