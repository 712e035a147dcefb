package srv_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// TestEncodedBodiesRefused: only Connect takes compressed messages (and
// inflates them to its limit). Every other route reads its body as it
// is, so a body with a Content-Encoding (gzip, a bomb or not) was read as
// garbage and refused for what it is not ("not valid JSON at byte 1").
// Each is now refused with 415, unread, before the token is looked at,
// saying the body must be sent as it is (Accept-Encoding: identity, RFC
// 7694), with the token or without.
func TestEncodedBodiesRefused(t *testing.T) {
	s, base := newGuarded(t, srv.Options{Push: testPush(t), Channels: &channel.Options{Routes: map[string][]channel.Channel{
		tokA: {&channel.Webhook{ID: "hook", URL: "http://127.0.0.1:9/", Secret: "webhook-secret", Token: tokA}}}}})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	_ = zw.Close()
	n := 0
	for _, r := range s.Routes() {
		method, path := splitPattern(r.Pattern)
		switch {
		case r.Guard == srv.GuardConnect, r.Guard == srv.GuardLogin, r.Guard == srv.GuardJoin, r.Guard == srv.GuardHello,
			r.Guard == srv.GuardPublic:
			continue // Connect inflates; WebSockets and the UI's files take no body
		case !strings.Contains(r.Pattern, " "):
			method = http.MethodPost // /mcp, /agui
		case method == http.MethodGet:
			continue
		}
		for _, tok := range []string{tokA, ""} {
			req, _ := http.NewRequest(method, base+path, bytes.NewReader(gz.Bytes()))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Content-Encoding", "gzip")
			if tok != "" {
				req.Header.Set(auth.TokenHeader, tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType || resp.Header.Get("Accept-Encoding") != "identity" ||
				!strings.Contains(string(body), "Content-Encoding") {
				t.Errorf("%s %s (token %v) gzipped: %d %q, Accept-Encoding %q; want 415 saying so",
					method, path, tok != "", resp.StatusCode, body, resp.Header.Get("Accept-Encoding"))
			}
		}
		n++
	}
	if n < 6 {
		t.Errorf("only %d routes that take a body", n)
	}
}
