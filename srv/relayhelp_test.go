package srv_test

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/testhost"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Helpers of the /agent/ws tests: a server with a relay, agents and hosts
// on real sockets, the study log.

// newRelayServer serves the whole server with study logs in a temp dir.
func newRelayServer(t *testing.T, ro relay.Options) (url, dataDir string) {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	dataDir = t.TempDir()
	logs, err := studylog.Open(dataDir, studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, StudyLogs: logs, Relay: ro})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL, dataDir
}

// agent is a raw /agent/ws client written from the seed.
type agent struct {
	t      *testing.T
	ws     *websocket.Conn
	in     chan map[string]any
	endErr error // why the read loop ended; set before in is closed
}

func dialAgent(t *testing.T, url string) *agent {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/agent/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, ws: ws, in: make(chan map[string]any, 256)}
	go func() {
		defer close(a.in)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				a.endErr = err
				return
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("relay sent non-JSON: %q", b)
				return
			}
			a.in <- m
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return a
}

func joinAgent(t *testing.T, url, token, session string) *agent {
	a := dialAgent(t, url)
	a.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"` + session + `","token":"` + token + `"}}`)
	j := a.expect("relay.joined")
	if j["replyTo"] != "join-001" {
		t.Fatalf("joined = %v", j)
	}
	return a
}

func (a *agent) sendJSON(s string) {
	a.t.Helper()
	if err := a.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		a.t.Fatal(err)
	}
}

// expect returns the next envelope of type typ, skipping pushes
// (state.updated, relay.presence) in between.
func (a *agent) expect(typ string) map[string]any {
	a.t.Helper()
	return a.next(typ, func(t any) bool { return t == "state.updated" || t == "relay.presence" })
}

// until returns the next envelope of type typ, skipping any other.
func (a *agent) until(typ string) map[string]any {
	a.t.Helper()
	return a.next(typ, func(any) bool { return true })
}

// next returns the next envelope of type typ, skipping those whose type
// skip allows; any other fails the test.
func (a *agent) next(typ string, skip func(t any) bool) map[string]any {
	a.t.Helper()
	// A bound for a test that would hang, not a measure: a loaded machine
	// running -race takes seconds over a big state.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-a.in:
			if !ok {
				a.t.Fatalf("connection closed waiting for %s", typ)
			}
			if m["type"] == typ {
				return m
			}
			if !skip(m["type"]) {
				a.t.Fatalf("waiting for %s, got %v", typ, m)
			}
		case <-deadline:
			a.t.Fatalf("no %s within 30s", typ)
		}
	}
}

// expectError returns the payload of the next error envelope and checks
// its code and replyTo.
func (a *agent) expectError(code, replyTo string) map[string]any {
	a.t.Helper()
	m := a.expect("error")
	p := m["payload"].(map[string]any)
	if p["code"] != code || (m["replyTo"] != nil && m["replyTo"] != replyTo) || (replyTo != "" && m["replyTo"] != replyTo) {
		a.t.Fatalf("error = %v, want code %s replyTo %q", m, code, replyTo)
	}
	if msg, _ := p["message"].(string); msg == "" {
		a.t.Fatalf("error without message: %v", m)
	}
	return p
}

// waitPresence waits for the relay to report the host online or gone.
func (a *agent) waitPresence(online bool) {
	a.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-a.in:
			if !ok {
				a.t.Fatal("connection closed")
			}
			if m["type"] == "relay.presence" && m["payload"].(map[string]any)["host"] == online {
				return
			}
		case <-deadline:
			a.t.Fatalf("no relay.presence host=%v", online)
		}
	}
}

func (a *agent) quiet(d time.Duration) {
	a.t.Helper()
	select {
	case m := <-a.in:
		if m != nil && m["type"] != "state.updated" && m["type"] != "relay.presence" {
			a.t.Fatalf("unexpected %v", m)
		}
	case <-time.After(d):
	}
}

var liveHosts []*testhost.Host

func hostFor(t *testing.T, url, token string, o testhost.Options) *testhost.Host {
	t.Helper()
	h, err := testhost.Dial(url, token, o)
	if err != nil {
		t.Fatal(err)
	}
	liveHosts = append(liveHosts, h)
	t.Cleanup(h.Close)
	return h
}

// closeHosts disconnects every test host opened so far.
func closeHosts(t *testing.T) {
	t.Helper()
	for _, h := range liveHosts {
		h.Close()
	}
	liveHosts = nil
}

func readLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %d: %v", len(out), err)
		}
		out = append(out, m)
	}
	return out
}
