package srv_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/srv"
)

// TestWrongMethodOnAPI: an API path (a WebSocket endpoint too) with
// another method is 405 with Allow, with the token or without, never the web UI's page; a path the
// server does not serve is 404; the app's pages are the page.
func TestWrongMethodOnAPI(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	do := func(method, p, token string) (*http.Response, string) {
		req, _ := http.NewRequest(method, base+p, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/health", "GET, HEAD"},
		{http.MethodDelete, "/api/catalog", "GET, HEAD"},
		{http.MethodPost, "/internal/sessions/inbox/status", "GET, HEAD"},
		{http.MethodGet, "/internal/send", "POST"},
		{http.MethodPut, "/internal/send", "POST"},
		// The WebSocket endpoints: the handshake is a GET (RFC 6455 4.1).
		{http.MethodPost, "/ws", "GET"},
		{http.MethodDelete, "/agent/ws", "GET"},
		{http.MethodPost, "/ingress/ws", "GET"},
		{http.MethodPut, "/ws", "GET"},
	} {
		for _, tok := range []string{tokA, ""} {
			resp, body := do(c.method, c.path, tok)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || strings.Contains(body, "<html") {
				t.Errorf("%s %s (token %v): %d Allow %q %q", c.method, c.path, tok != "", resp.StatusCode, resp.Header.Get("Allow"), body)
			}
			if strings.HasSuffix(c.path, "/ws") && !resp.Close {
				// The refused handshake ends the connection: it must say
				// so, or a client sends its next request into a closed
				// socket.
				t.Errorf("%s %s (token %v): no Connection: close", c.method, c.path, tok != "")
			}
		}
	}
	// A GET that is no WebSocket handshake (no Upgrade) is refused, and
	// the connection ends with the answer: it says so too.
	for _, p := range []string{"/ws", "/agent/ws", "/ingress/ws"} {
		if resp, _ := do(http.MethodGet, p, tokA); resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Errorf("GET %s without Upgrade: %d, Connection: close %v", p, resp.StatusCode, resp.Close)
		}
	}
	for _, p := range []string{"/favicon.ico", "/assets/missing.js", "/.git/config", "/debug/pprof/", "/internal/", "/internal/other", "/api/other"} {
		if resp, body := do(http.MethodGet, p, tokA); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "<html") {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/", "/?token=" + tokA, "/booking?token=" + tokA, "/agui-demo?token=" + tokA + "&thread=demo"} {
		if resp, _ := do(http.MethodGet, p, ""); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("page %s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
