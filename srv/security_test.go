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
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/push"
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

// splitPattern turns a ServeMux pattern into a method and a concrete path.
func splitPattern(p string) (method, path string) {
	method, path = "GET", p
	if i := strings.Index(p, " "); i >= 0 {
		method, path = p[:i], p[i+1:]
	}
	return method, strings.ReplaceAll(path, "{id}", "inbox")
}

// TestEveryRouteRefusesBadTokens walks the registered routes (and every
// Connect method) with missing, wrong, truncated and over-long tokens.
func TestEveryRouteRefusesBadTokens(t *testing.T) {
	s, base := newGuarded(t, srv.Options{Push: testPush(t), Channels: &channel.Options{Routes: map[string][]channel.Channel{
		tokA: {&channel.Webhook{ID: "hook", URL: "http://127.0.0.1:9/", Secret: "webhook-secret", Token: tokA}}}}})
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
					a.expectError(wire.InvalidMessage, "j")
				}
				if _, open := <-a.in; open {
					t.Errorf("/agent/ws kept a connection with a %s token", name)
				}
				if name == "over-long" && !websocket.IsCloseError(a.endErr, websocket.CloseMessageTooBig) {
					// over-long: the pre-join frame limit closed it
					t.Errorf("/agent/ws with an over-long token: %v, want close 1009", a.endErr)
				}
			}
		case srv.GuardHello:
			for name, tok := range badTokens {
				ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+path, nil)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				_ = ws.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u1","api_key":%q}`, tok)))
				var got []string
				var end error
				for {
					_, b, err := ws.ReadMessage()
					if err != nil {
						end = err
						break
					}
					got = append(got, string(b))
				}
				ws.Close()
				switch {
				case name == "over-long":
					// over-long: the pre-hello frame limit closed it
					if !websocket.IsCloseError(end, websocket.CloseMessageTooBig) {
						t.Errorf("%s with an over-long api_key: %v, want close 1009", path, end)
					}
				case len(got) != 1 || !strings.Contains(got[0], `"code":"auth_failed"`) || !websocket.IsCloseError(end, websocket.ClosePolicyViolation):
					t.Errorf("%s with a %s api_key: %v then %v", path, name, got, end)
				}
			}
		case srv.GuardStatus:
			// No token: the status alone (TestHealthForABalancer); a
			// wrong one is refused as anywhere else.
			for name, tok := range badTokens {
				for _, how := range []string{"header", "query", "bearer"} {
					req, _ := http.NewRequest(method, base+path, nil)
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
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if name == "missing" {
						if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != `{"status":"healthy"}` {
							t.Errorf("%s without a token in %s: %d %s", path, how, resp.StatusCode, b)
						}
					} else if resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("%s with %s token in %s: %d", path, name, how, resp.StatusCode)
					}
				}
			}
		case srv.GuardPublic:
			// Static files only: the UI fetches its data through the routes above.
		case srv.GuardSigned:
			for name, tok := range badTokens {
				req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"id":"q","text":"Yes"}`))
				req.Header.Set(auth.TokenHeader, tok)
				req.Header.Set(channel.TimestampHeader, fmt.Sprint(time.Now().Unix()))
				req.Header.Set(channel.SignatureHeader, "v1=00")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s with a bad signature (and a %s token): %d, want 401", path, name, resp.StatusCode)
				}
			}
		case srv.GuardCapability:
			for name, tok := range badTokens {
				req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"cap":"made-up","text":"Yes"}`))
				req.Header.Set(auth.TokenHeader, tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusGone {
					t.Errorf("%s with no capability (and a %s token): %d, want 410", path, name, resp.StatusCode)
				}
			}
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
	paths := []string{"/booking", "/agui-demo"}
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

// TestSimultaneousAnswers: two tabs answer one question at the same
// instant, many times over; exactly one wins each time.
func TestSimultaneousAnswers(t *testing.T) {
	s, base := newGuarded(t, srv.Options{})
	a, b := login(t, base, tokA, "tab-a"), login(t, base, tokA, "tab-b")
	for round := range 30 {
		id := fmt.Sprint("race-", round)
		done := make(chan *hub.Reply, 1)
		go func() {
			r, err := s.Hub().Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "?", Timeout: time.Minute})
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
		_, _ = s.Hub().Ask(context.Background(), tokB, hub.Request{Kind: wire.TaskFinish, ID: "herd", Text: "?", Timeout: time.Minute})
	}()
	waitFor(t, "herd pending", func() bool { return s.Hub().Validity(tokB, []string{"herd"})["herd"] })
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if s.Hub().Answer(context.Background(), tokB, wire.TaskFinish, "herd", hub.Reply{ClientID: fmt.Sprint(i)}) == nil {
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

// testPush is push switched on, its keys and subscriptions in a
// directory of the test's.
func testPush(t *testing.T) *push.Options {
	t.Helper()
	dir := t.TempDir()
	keys, err := push.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := push.OpenFileSubscriptions(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &push.Options{Keys: keys, Subscriptions: subs}
}
