package ingress_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/ingresstest"
	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

const (
	tok  = "ingress-token-0001"
	tokB = "ingress-token-0002"
)

// TestMain doubles as the orchestrator's process: the tests start this
// binary again with INGRESS_TEST_ORCHESTRATOR set. Every test of the
// package checks the lock order (internal/lockorder).
func TestMain(m *testing.M) {
	if os.Getenv("INGRESS_TEST_ORCHESTRATOR") != "" {
		ingresstest.Main()
	}
	lockorder.Main(m)
}

// startOrchestrator runs the double in a process of its own, pushing to
// ingressURL, and returns its base URL.
func startOrchestrator(t *testing.T, ingressURL string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INGRESS_TEST_ORCHESTRATOR=1", "INGRESS_URL="+ingressURL, "INGRESS_TOKEN="+tok)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the double ends when its stdin closes
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("orchestrator double: %v", err)
	}
	return strings.TrimSpace(line)
}

type env struct {
	url  string // the server
	orch string // the orchestrator double, if any
	data string
	srv  *srv.Server
}

// newEnv serves the whole server. With external, an orchestrator double
// runs in its own process and the server uses it ([ingress] orchestrator_url);
// without, the built-in orchestrator runs.
func newEnv(t *testing.T, external bool, o ingress.Options, ho ingress.HTTPOptions) *env {
	t.Helper()
	return newEnvRelay(t, external, o, ho, relay.Options{})
}

// newEnvRelay is newEnv with the relay's options ro.
func newEnvRelay(t *testing.T, external bool, o ingress.Options, ho ingress.HTTPOptions, ro relay.Options) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{url: "http://" + ln.Addr().String(), data: t.TempDir()}
	if external {
		e.orch = startOrchestrator(t, e.url)
		if ho.URL == "" {
			ho.URL = e.orch
		}
		orch, err := ingress.NewHTTPOrchestrator(ho)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(orch.CloseIdle)
		o.Orchestrator = orch
	}
	toks, err := auth.NewTokens(tok, tokB)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := studylog.Open(e.data, studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv.New(srv.Options{Tokens: toks, StudyLogs: logs, Ingress: o, Relay: ro})
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() {
		e.srv.Close()
		ts.Close()
	})
	return e
}

// calls waits for the double to have got n calls, and returns them all.
func (e *env) calls(t *testing.T, n int) []ingresstest.Call {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(fmt.Sprintf("%s/debug/calls?min=%d", e.orch, n))
	if err != nil {
		t.Fatalf("the orchestrator did not get %d calls: %v", n, err)
	}
	defer resp.Body.Close()
	var out []ingresstest.Call
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) callsTo(t *testing.T, n int, prefix string) []ingresstest.Call {
	t.Helper()
	var out []ingresstest.Call
	for _, c := range e.calls(t, n) {
		if strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// client is a plain WebSocket Ingress client.
type client struct {
	t    *testing.T
	ws   *websocket.Conn
	in   chan map[string]any
	end  error
	sess string
	last uint64
}

func dial(t *testing.T, base string) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ingress/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, ws: ws, in: make(chan map[string]any, 1024)}
	go func() {
		defer close(c.in)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				c.end = err
				return
			}
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Errorf("the server sent non-JSON: %q", b)
				return
			}
			c.in <- m
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return c
}

func (c *client) send(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next event.
func (c *client) next() map[string]any {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatalf("connection ended: %v", c.end)
		}
		if s, ok := m["seq"].(json.Number); ok {
			n, _ := s.Int64()
			if uint64(n) <= c.last {
				c.t.Fatalf("event %v out of order or twice (last seq %d)", m, c.last)
			}
			c.last = uint64(n)
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no event within 10s")
	}
	return nil
}

// expect returns the next event, which must be of type typ.
func (c *client) expect(typ string) map[string]any {
	c.t.Helper()
	m := c.next()
	if m["type"] != typ {
		c.t.Fatalf("got %v, want a %s", m, typ)
	}
	return m
}

func (c *client) expectError(code string) map[string]any {
	c.t.Helper()
	m := c.expect("error")
	if m["code"] != code || m["message"] == "" {
		c.t.Fatalf("error %v, want code %s with a message", m, code)
	}
	return m
}

// closed waits for the server to close the connection.
func (c *client) closed() error {
	c.t.Helper()
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				return c.end
			}
			c.t.Logf("before the close: %v", m)
		case <-time.After(10 * time.Second):
			c.t.Fatal("the connection was not closed")
		}
	}
}

// hello says hello with extra fields (a JSON object's inside, or "").
func (c *client) hello(user, extra string) map[string]any {
	c.t.Helper()
	if extra != "" {
		extra = "," + extra
	}
	c.send(fmt.Sprintf(`{"type":"hello","ts":1704067200000,"user_id":%q,"api_key":%q%s}`, user, tok, extra))
	ack := c.expect("hello_ack")
	c.sess, _ = ack["session_id"].(string)
	if !strings.HasPrefix(c.sess, "sess_") {
		c.t.Fatalf("hello_ack %v", ack)
	}
	return ack
}

// appendix returns one of Appendix A's client messages verbatim but for
// what this server assigns: the api_key is this server's token, the
// session and run ids those it acknowledged.
func appendix(msg, session, run string) string {
	msg = strings.ReplaceAll(msg, `"sk-xxx"`, `"`+tok+`"`)
	msg = strings.ReplaceAll(msg, `"sess_001"`, `"`+session+`"`)
	if run != "" {
		msg = strings.ReplaceAll(msg, `"run_001"`, `"`+run+`"`)
	}
	return msg
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func readAll(r io.Reader) string { b, _ := io.ReadAll(r); return string(b) }
