package srv_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/inbox"
)

// ingressHello opens /ingress/ws for token and says hello; it returns
// the connection and its session id.
func ingressHello(t *testing.T, base, token string) (*websocket.Conn, string) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ingress/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","ts":1,"user_id":"u1","api_key":"`+token+`"}`)); err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
	}
	if err := ws.ReadJSON(&ack); err != nil || ack.Type != "hello_ack" {
		t.Fatalf("hello: %v %v", ack, err)
	}
	return ws, ack.SessionID
}

// TestHealthCountsIngress: /health counts /ingress/ws connections beside
// those of /ws and /agent/ws, by state.
func TestHealthCountsIngress(t *testing.T) {
	_, base := newServer(t, inbox.Options{})
	ingressHello(t, base, tokA)
	ingressHello(t, base, tokA)
	code, m := call(t, "GET", base+"/health", "")
	// By state: ACTIVE, or AUTHENTICATING for the moment between
	// hello_ack and the reader marking its connection active.
	states, _ := m["ingressStates"].(map[string]any)
	n := 0.0
	for _, v := range states {
		n += v.(float64)
	}
	if code != 200 || m["ingressConnections"] != 2.0 || n != 2 || m["ingressSessions"] != 1.0 {
		b, _ := json.Marshal(m)
		t.Fatalf("/health: %d %s", code, b)
	}
}

// TestInternalAPIOtherTokensSession: an Ingress session of another token
// is not found (404 session_not_found) by /internal/send or the status,
// distinct from a session of this token without devices
// (client_offline).
func TestInternalAPIOtherTokensSession(t *testing.T) {
	_, base := newServer(t, inbox.Options{})
	_, theirs := ingressHello(t, base, tokB)
	push := `{"session_id":"` + theirs + `","event":{"type":"state","run_id":"run_1","state":"RUNNING"}}`
	if code, m := call(t, "POST", base+"/internal/send", push); code != http.StatusNotFound || m["error"] != "session_not_found" {
		t.Fatalf("send to another token's session: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/internal/sessions/"+theirs+"/status", ""); code != http.StatusNotFound || m["error"] != "session_not_found" {
		t.Fatalf("status of another token's session: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/internal/sessions/sess_0123456789abcdef/status", ""); code != http.StatusNotFound || m["error"] != "session_not_found" {
		t.Fatalf("status of no session: %d %v", code, m)
	}
	ws, mine := ingressHello(t, base, tokA)
	if code, m := call(t, "GET", base+"/internal/sessions/"+mine+"/status", ""); code != 200 || m["online"] != true {
		t.Fatalf("status of my session: %d %v", code, m)
	}
	ws.Close()
	push = `{"session_id":"` + mine + `","event":{"type":"state","run_id":"run_1","state":"RUNNING"}}`
	for {
		code, m := call(t, "POST", base+"/internal/send", push)
		if code == http.StatusConflict && m["error"] == "client_offline" {
			break
		}
		if code != 200 {
			t.Fatalf("send to my session without devices: %d %v", code, m)
		}
	}
}

// TestInternalSendSaysWhatIsWrong: a bad body or event is answered
// invalid_message in words, without Go's JSON internals.
func TestInternalSendSaysWhatIsWrong(t *testing.T) {
	_, base := newServer(t, inbox.Options{})
	_, mine := ingressHello(t, base, tokA)
	for _, body := range []string{`{"session_id":1}`, `{"session_id":"` + mine + `","event":{"type":"state","ts":"soon"}}`} {
		code, m := call(t, "POST", base+"/internal/send", body)
		msg, _ := m["message"].(string)
		if code != http.StatusBadRequest || m["error"] != "invalid_message" || msg == "" || strings.Contains(msg, "json:") || strings.Contains(msg, "Go ") {
			t.Errorf("%s: %d %v", body, code, m)
		}
	}
}

// TestInternalSendRefusesWhatIsNotTheOrchestrators: an event type the
// orchestrator may not push to an Ingress session (hello_ack and
// run_started are the server's own; anything else is no event of seed
// 003) is refused 400 invalid_message naming the types it may push,
// rather than answered ok and delivered to nobody; one it may push
// reaches the device.
func TestInternalSendRefusesWhatIsNotTheOrchestrators(t *testing.T) {
	_, base := newServer(t, inbox.Options{})
	ws, mine := ingressHello(t, base, tokA)
	for _, typ := range []string{"hello_ack", "run_started", "hello", "agent.message", "Delta"} {
		body := `{"session_id":"` + mine + `","event":{"type":"` + typ + `","ts":1,"session_id":"` + mine + `"}}`
		code, m := call(t, "POST", base+"/internal/send", body)
		msg, _ := m["message"].(string)
		if code != http.StatusBadRequest || m["ok"] != false || m["error"] != "invalid_message" {
			t.Errorf("push %s: %d %v", typ, code, m)
			continue
		}
		for _, want := range []string{typ, "delta", "state", "tool_request", "approval_required", "error", "done"} {
			if !strings.Contains(msg, want) {
				t.Errorf("push %s: message %q does not name %q", typ, msg, want)
			}
		}
	}
	body := `{"session_id":"` + mine + `","event":{"type":"delta","ts":1,"text":"hi"}}`
	if code, m := call(t, "POST", base+"/internal/send", body); code != http.StatusOK || m["ok"] != true {
		t.Fatalf("push delta: %d %v", code, m)
	}
	var ev map[string]any
	if err := ws.ReadJSON(&ev); err != nil || ev["type"] != "delta" {
		t.Fatalf("the device got %v, %v; want the delta (and nothing refused before it)", ev, err)
	}
}
