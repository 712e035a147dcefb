package srv_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// badTokens are what each surface must refuse.
var badTokens = map[string]string{
	"missing":   "",
	"wrong":     "room-Z-token-9999",
	"truncated": tokA[:len(tokA)-1],
	"extended":  tokA + "0",
	"over-long": strings.Repeat("A", 64<<10),
}

func newGuarded(t *testing.T, o srv.Options) (*srv.Server, string) {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	o.Tokens = toks
	if o.Limiter == nil {
		o.Limiter = auth.NewLimiter(1_000_000, time.Minute) // the limit has its own test
	}
	s := srv.New(o)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL
}

// connectMethods lists every RPC of the proto file: a service mounted
// without the guard, or not mounted at all, fails the walk.
func connectMethods() []string {
	var out []string
	svcs := pb.File_agentassistproto_agentassist_proto.Services()
	for i := range svcs.Len() {
		ms := svcs.Get(i).Methods()
		for j := range ms.Len() {
			out = append(out, fmt.Sprintf("/%s/%s", svcs.Get(i).FullName(), ms.Get(j).Name()))
		}
	}
	return out
}

func connectCall(t *testing.T, base, path, token string, header bool) (int, string) {
	t.Helper()
	body := `{}`
	if !header && token != "" {
		body = fmt.Sprintf(`{"UserToken":%q}`, token)
	}
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if header && token != "" {
		req.Header.Set(auth.TokenHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEveryRouteRefusesBadTokens walks the registered routes (and every
// Connect method) with missing, wrong, truncated and over-long tokens.
func TestEveryRouteRefusesBadTokens(t *testing.T) {
	s, base := newGuarded(t, srv.Options{})
	routes := s.Routes()
	if len(routes) < 6 {
		t.Fatalf("routes = %v", routes)
	}
	methods := connectMethods()
	seen := map[string]bool{}
	for _, r := range routes {
		method, path := splitPattern(r.Pattern)
		switch r.Guard {
		case srv.GuardConnect:
			for _, m := range methods {
				if !strings.HasPrefix(m, path) {
					continue
				}
				seen[m] = true
				for name, tok := range badTokens {
					for _, header := range []bool{false, true} {
						code, body := connectCall(t, base, m, tok, header)
						wantCode, want := http.StatusUnauthorized, "unauthenticated"
						if name == "over-long" && !header {
							// A message over the pre-login limit is refused unread.
							wantCode, want = http.StatusTooManyRequests, "resource_exhausted"
						}
						if code != wantCode || !strings.Contains(body, want) {
							t.Errorf("%s with %s token (header=%v): %d %s", m, name, header, code, body)
						}
					}
				}
			}
		case srv.GuardHeader:
			for name, tok := range badTokens {
				for _, how := range []string{"header", "query", "bearer"} {
					req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"session_id":"default","event":{"type":"ping"}}`))
					switch how {
					case "header":
						req.Header.Set(auth.TokenHeader, tok)
					case "query":
						req.URL.RawQuery = "token=" + tok
					case "bearer":
						req.Header.Set("Authorization", "Bearer "+tok)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("%s with %s token in %s: %d", path, name, how, resp.StatusCode)
					}
				}
			}
			req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"session_id":"default","event":{"type":"ping"}}`))
			req.Header.Set(auth.TokenHeader, tokA)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
				t.Errorf("%s %s with the token: %d", method, path, resp.StatusCode)
			}
		case srv.GuardLogin:
			for name, tok := range badTokens {
				c, err := wstest.Dial(base, tok, "x", nil)
				switch {
				case err != nil && strings.Contains(err.Error(), "1009"):
					// over-long: the pre-login frame limit closed it
				case err != nil:
					t.Fatalf("%s token on /ws: %v", name, err)
				case c.Login.GetSuccess():
					t.Errorf("/ws accepted a %s token", name)
				}
				if c != nil {
					c.Close()
				}
			}
		case srv.GuardJoin:
			for name, tok := range badTokens {
				a := dialAgent(t, base)
				a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host","token":%q}}`, tok))
				if name != "over-long" {
					a.expectError(relay.InvalidMessage, "j")
				}
				if _, open := <-a.in; open {
					t.Errorf("/agent/ws kept a connection with a %s token", name)
				}
				if name == "over-long" && !websocket.IsCloseError(a.endErr, websocket.CloseMessageTooBig) {
					// over-long: the pre-join frame limit closed it
					t.Errorf("/agent/ws with an over-long token: %v, want close 1009", a.endErr)
				}
			}
		case srv.GuardPublic:
			// Static files only: the UI fetches its data through the routes above.
		default:
			t.Errorf("route %s has unknown guard %q", r.Pattern, r.Guard)
		}
	}
	for _, m := range methods {
		if !seen[m] {
			t.Errorf("RPC %s is not served behind the guard", m)
		}
	}
}

// TestDNSRebinding: a page on evil.example resolving to 127.0.0.1 reaches
// the server with its own name in Host; every route refuses it.
func TestDNSRebinding(t *testing.T) {
	s, base := newGuarded(t, srv.Options{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	hosts := map[string]bool{
		"evil.example:" + port:             false,
		"localhost.:" + port:               false,
		"localhost.evil.com:" + port:       false,
		"0177.0.0.1:" + port:               false,
		"2130706433:" + port:               false,
		"127.0.0.1.nip.io:" + port:         false,
		"LOCALHOST:" + port:                true,
		"127.0.0.1:" + port:                true,
		"[::1]:" + port:                    true,
		"localhost:" + port:                true,
		"127.0.0.1":                        true,
		strings.Repeat("a", 300) + ".test": false,
	}
	paths := []string{"/booking"}
	for _, r := range s.Routes() {
		_, p := splitPattern(r.Pattern)
		if r.Guard == srv.GuardConnect {
			p += "AskQuestion"
		}
		paths = append(paths, p)
	}
	for host, ok := range hosts {
		for _, p := range paths {
			req, _ := http.NewRequest("GET", base+p, nil)
			req.Host = host
			req.Header.Set(auth.TokenHeader, tokA)
			if p == "/ws" || p == "/agent/ws" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode != http.StatusForbidden; got != ok {
				t.Errorf("Host %.40q %s: status %d, allowed=%v", host, p, resp.StatusCode, ok)
			}
		}
	}
	// No Host at all (HTTP/1.0).
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /health?token=%s HTTP/1.0\r\n\r\n", tokA)
	b, _ := io.ReadAll(conn)
	if !bytes.Contains(b, []byte(" 403 ")) {
		t.Errorf("missing Host: %q", b[:min(len(b), 40)])
	}
}

// TestCrossSiteWebSocket: a foreign Origin is refused before the upgrade,
// even with a valid token; no CORS header is ever granted.
func TestCrossSiteWebSocket(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	u := strings.TrimPrefix(base, "http://")
	for _, origin := range []string{"null", "http://localhost.evil.com", "http://evil.example", "http://127.0.0.1:1", "https://" + u, "file://"} {
		for _, p := range []string{"/ws", "/agent/ws"} {
			h := http.Header{"Origin": {origin}}
			ws, resp, err := websocket.DefaultDialer.Dial("ws://"+u+p, h)
			if err == nil {
				ws.Close()
				t.Errorf("%s upgraded for Origin %q", p, origin)
				continue
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s Origin %q: %v %v", p, origin, resp, err)
			}
		}
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+u+"/ws", http.Header{"Origin": {"http://" + u}})
	if err != nil {
		t.Fatalf("same origin refused: %v", err)
	}
	ws.Close()
	req, _ := http.NewRequest("OPTIONS", base+"/agentassistproto.SrvAgentAssist/AskQuestion", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("CORS granted to %q", v)
	}
}

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
	start := time.Now()
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	for i := 0; i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		if _, err := conn.Write([]byte("X-Slow: 1\r\n")); err != nil {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, _ = io.ReadAll(conn)
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("slow headers kept the connection for %s", d)
	}
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
	b.expectError(relay.InvalidMessage, "j")
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

// TestSimultaneousAnswers: two tabs answer one question at the same
// instant, many times over; exactly one wins each time.
func TestSimultaneousAnswers(t *testing.T) {
	s, base := newGuarded(t, srv.Options{})
	a, b := login(t, base, tokA, "tab-a"), login(t, base, tokA, "tab-b")
	for round := range 30 {
		id := fmt.Sprint("race-", round)
		done := make(chan *hub.Reply, 1)
		go func() {
			r, err := s.Hub().Ask(context.Background(), tokA, hub.Request{Kind: hub.AskQuestion, ID: id, Text: "?", Timeout: time.Minute})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		expect(t, a, "AskQuestion")
		expect(t, b, "AskQuestion")
		var wg sync.WaitGroup
		for _, c := range []*wstest.Client{a, b} {
			wg.Go(func() { _ = c.Send(wstest.TextReply(id, c.ID)) })
		}
		wg.Wait()
		r := <-done
		winner, loser := a, b
		if r.ClientID == b.ID {
			winner, loser = b, a
		}
		if r.ClientID != winner.ID || r.Contents[0].GetText().GetText() != winner.ID {
			t.Fatalf("round %d: reply %+v", round, r)
		}
		// The loser hears who won (and its own answer is refused), in
		// whichever order the two frames raced.
		got := map[string]bool{}
		for len(got) < 2 {
			m, err := loser.Next(5 * time.Second)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if m.Cmd == "UserConnectionStatusNotification" {
				continue // the other tab's login, announced after a delay
			}
			got[m.Cmd] = true
		}
		if !got["AskQuestionReplyNotification"] || !got["Error"] {
			t.Fatalf("round %d: loser got %v", round, got)
		}
	}

	// And straight at the hub, 32 at once.
	var wins atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Hub().Ask(context.Background(), tokB, hub.Request{Kind: hub.TaskFinish, ID: "herd", Text: "?", Timeout: time.Minute})
	}()
	for s.Hub().Validity(tokB, []string{"herd"})["herd"] == false {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if s.Hub().Answer(tokB, hub.TaskFinish, "herd", hub.Reply{ClientID: fmt.Sprint(i)}) == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	<-done
	if wins.Load() != 1 {
		t.Errorf("%d answers won", wins.Load())
	}
}

// splitPattern turns a ServeMux pattern into a method and a concrete path.
func splitPattern(p string) (method, path string) {
	method, path = "GET", p
	if i := strings.Index(p, " "); i >= 0 {
		method, path = p[:i], p[i+1:]
	}
	return method, strings.ReplaceAll(path, "{id}", "inbox")
}
