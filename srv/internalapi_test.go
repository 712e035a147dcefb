package srv_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/testhost"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
)

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set(auth.TokenHeader, tokA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestInternalAPI: seed 003's session status and push, with
// client_offline when nobody is there.
func TestInternalAPI(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	code, m := call(t, "GET", url+"/internal/sessions/inbox/status", "")
	if code != 200 || m["online"] != false || m["connection_count"] != 0.0 {
		t.Fatalf("inbox before anyone: %d %v", code, m)
	}
	login(t, url, tokA, "pc")
	login(t, url, tokA, "phone")
	code, m = call(t, "GET", url+"/internal/sessions/inbox/status", "")
	if m["online"] != true || m["connection_count"] != 2.0 || m["last_activity_at"].(float64) < float64(time.Now().Add(-time.Minute).UnixMilli()) {
		t.Fatalf("inbox with two devices: %d %v", code, m)
	}

	push := `{"session_id":"default","event":{"type":"agent.message","payload":{"text":"from the orchestrator"}}}`
	code, m = call(t, "POST", url+"/internal/send", push)
	if code != http.StatusConflict || m["ok"] != false || m["error"] != "client_offline" {
		t.Fatalf("push with no host: %d %v", code, m)
	}
	h := hostFor(t, url, tokA, testhost.Options{})
	code, m = call(t, "POST", url+"/internal/send", push)
	if code != 200 || m["ok"] != true {
		t.Fatalf("push: %d %v", code, m)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		found := false
		for _, e := range h.Seen() {
			if e["type"] == "agent.message" {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the host never got the pushed event")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, m = call(t, "GET", url+"/internal/sessions/default/status", "")
	if m["online"] != true || m["connection_count"] != 1.0 {
		t.Fatalf("relay session status: %v", m)
	}
	for _, bad := range []string{`{`, `{"session_id":"default"}`, `{"session_id":"../x","event":{"type":"a"}}`} {
		if code, m := call(t, "POST", url+"/internal/send", bad); code != 400 || m["error"] != "invalid_message" {
			t.Errorf("push %s: %d %v", bad, code, m)
		}
	}
}
