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

// TestInternalStatusRefusesOddSessionIDs: a session id is "inbox", an
// Ingress session's (sess_…) or a relay session's name, written as is in
// the path. ".", "..", an empty one, one with a slash or written with
// escapes is refused 400 invalid_message, like the route's other errors,
// and never redirected (ServeMux would send ../status on to another
// route) nor answered as if it were a session.
func TestInternalStatusRefusesOddSessionIDs(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Header.Set(auth.TokenHeader, tokA)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	for _, p := range []string{
		"/internal/sessions/../status", "/internal/sessions/./status", "/internal/sessions//status",
		"/internal/sessions/%2e%2e/status", "/internal/sessions/%2E%2e/status", "/internal/sessions/%2e/status",
		"/internal/sessions/a%2fb/status", "/internal/sessions/a%2Fb/status", "/internal/sessions/%64efault/status",
		"/internal/sessions/de%2efault/status", "/internal/sessions/a/../default/status", "/internal/sessions/x/../../send",
		"/internal/sessions/sess_%2e%2e/status", "/internal/sessions/" + strings.Repeat("a", 65) + "/status",
	} {
		code, m := get(p)
		if code != http.StatusBadRequest || m["ok"] != false || m["error"] != "invalid_message" || m["message"] == "" {
			t.Errorf("GET %s: %d %v, want 400 invalid_message", p, code, m)
		}
	}
	for _, id := range []string{"default", "inbox", "a.b", "...", "x_-1"} {
		if code, m := get("/internal/sessions/" + id + "/status"); code != http.StatusOK || m["session_id"] != id {
			t.Errorf("GET the status of %s: %d %v", id, code, m)
		}
	}
	// Without the token, the token is what is wrong.
	req, _ := http.NewRequest(http.MethodGet, url+"/internal/sessions/../status", nil)
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestInternalSendRefusesDuplicateKeys: a push whose body gives a key
// twice, at any depth, is refused 400 invalid_message, not read as its
// last.
func TestInternalSendRefusesDuplicateKeys(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := hostFor(t, url, tokA, testhost.Options{})
	for _, body := range []string{
		`{"session_id":"nobody","session_id":"default","event":{"type":"agent.message","payload":{"text":"x"}}}`,
		`{"session_id":"default","event":{"type":"agent.message","payload":{"text":"x","text":"y"}}}`,
		`{"session_id":"default","event":{"type":"agent.message","payload":{"a":[{"b":1,"\u0062":2}]}}}`,
		`{"session_id":"default","event":{"type":"agent.message","payload":{"n":1e999999}}}`,
	} {
		if code, m := call(t, "POST", url+"/internal/send", body); code != 400 || m["error"] != "invalid_message" {
			t.Errorf("push %s: %d %v", body, code, m)
		}
	}
	for _, e := range h.Seen() {
		if e["type"] == "agent.message" {
			t.Errorf("the host got %v", e)
		}
	}
}
