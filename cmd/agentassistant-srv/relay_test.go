package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestRelaySettings: [relay] max_sessions_per_token and call_timeout
// reach the server run starts: a
// token's third relay session is refused naming the setting, and a call
// the host leaves unanswered fails after the configured time.
func TestRelaySettings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(cfg, []byte("[relay]\nmax_sessions_per_token = 2\ncall_timeout = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := runServer(t, "-config", cfg)
	token := u.Query().Get("token")
	dial := func(role, session string) (*websocket.Conn, map[string]any) {
		t.Helper()
		ws, _, err := websocket.DefaultDialer.Dial("ws://"+u.Host+"/agent/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		send(t, ws, fmt.Sprintf(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":%q,"sessionId":%q,"token":%q}}`, role, session, token))
		return ws, next(t, ws, "")
	}
	host, joined := dial("host", "one")
	if joined["type"] != "relay.joined" {
		t.Fatalf("first join: %v", joined)
	}
	agent, _ := dial("agent", "one")
	dial("agent", "two")
	_, refused := dial("agent", "three")
	if p, _ := refused["payload"].(map[string]any); refused["type"] != "error" || !strings.Contains(fmt.Sprint(p["message"]), "[relay] max_sessions_per_token") {
		t.Fatalf("third relay session: %v", refused)
	}

	send(t, agent, `{"v":"mvp-0.2","type":"session.start","id":"s","payload":{}}`)
	start := next(t, host, "session.start")
	send(t, host, fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, start["id"]))
	next(t, agent, "session.started")
	send(t, agent, `{"v":"mvp-0.2","type":"tool.call","id":"c","payload":{"toolName":"select","params":{},"reason":"r"}}`)
	failed := next(t, agent, "error")
	if p, _ := failed["payload"].(map[string]any); failed["replyTo"] != "c" || p["code"] != "TOOL_EXECUTION_FAILED" || !strings.Contains(fmt.Sprint(p["message"]), "within 1s") {
		t.Fatalf("unanswered call: %v", failed)
	}
}

func send(t *testing.T, ws *websocket.Conn, s string) {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

// next returns the next envelope of type typ ("": any) ws receives.
func next(t *testing.T, ws *websocket.Conn, typ string) map[string]any {
	t.Helper()
	for {
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %q: %v", typ, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if typ == "" || m["type"] == typ {
			return m
		}
	}
}
