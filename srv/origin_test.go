package srv_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// foreignOrigins are Origins the guard refuses on every surface.
var foreignOrigins = []string{"http://evil.example", "null", "http://localhost.evil.com", "http://127.0.0.1:1", "file://"}

// TestCrossSiteCalls: a Connect call or POST /internal/send that carries
// a foreign Origin is refused even with a valid token in the header
// (Connect: permission_denied in Connect's own error shape; plain: 403);
// the same calls without an Origin, or from the server's own origin, go
// through.
func TestCrossSiteCalls(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	self := base // httptest's URL is the origin a page of this server has
	post := func(path, origin, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(auth.TokenHeader, tokA)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, m := range connectMethods() {
		for _, origin := range foreignOrigins {
			code, body := post(m, origin, `{}`)
			var e struct{ Code string }
			if code != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || e.Code != "permission_denied" {
				t.Errorf("%s Origin %q: %d %s", m, origin, code, body)
			}
		}
	}
	const info = "/agentassistproto.SrvAgentAssist/SendMcpClientInfo"
	for _, origin := range []string{"", self} {
		if code, body := post(info, origin, `{"Request":{}}`); code != http.StatusOK {
			t.Errorf("%s Origin %q: %d %s", info, origin, code, body)
		}
	}
	// A generated client over gRPC hears the same refusal as a status.
	cl := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, base, connect.WithGRPC(),
		connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set(auth.TokenHeader, tokA)
				req.Header().Set("Origin", "http://evil.example")
				return next(ctx, req)
			}
		})))
	if _, err := cl.SendMcpClientInfo(t.Context(), &pb.McpClientInfoRequest{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("gRPC with a foreign Origin: %v", err)
	}

	const send = "/internal/send"
	for _, origin := range foreignOrigins {
		if code, body := post(send, origin, `{"session_id":"s1","event":{"type":"x"}}`); code != http.StatusForbidden {
			t.Errorf("%s Origin %q: %d %s", send, origin, code, body)
		}
	}
	for _, origin := range []string{"", self} {
		// No host in s1: the push is refused as client_offline, past the
		// Origin check.
		if code, body := post(send, origin, `{"session_id":"s1","event":{"type":"x"}}`); code != http.StatusConflict || !strings.Contains(body, "client_offline") {
			t.Errorf("%s Origin %q: %d %s", send, origin, code, body)
		}
	}
}

// TestTwoOrigins: a request with more than one Origin header is refused
// like a foreign one on every surface that checks Origin, with a valid
// token, whatever the values (the server's own twice, or its own first
// and another site's after): a browser sends one, and a check that read
// only the first would let the second through unseen.
func TestTwoOrigins(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	do := func(method, path string, origins []string, h map[string]string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set(auth.TokenHeader, tokA)
		req.Header.Set("Authorization", "Bearer "+tokA)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		for _, o := range origins {
			req.Header.Add("Origin", o)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return resp.StatusCode, "(upgraded)"
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	jsonBody := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, origins := range [][]string{{base, base}, {base, "http://evil.example"}} {
		for _, c := range []struct {
			method, path string
			h            map[string]string
			body         string
		}{
			{http.MethodGet, "/ws", upgrade, ""},
			{http.MethodGet, "/agent/ws", upgrade, ""},
			{http.MethodGet, "/ingress/ws", upgrade, ""},
			{http.MethodPost, "/mcp", jsonBody, initBody},
			{http.MethodPost, "/internal/send", jsonBody, `{"session_id":"s1","event":{"type":"x"}}`},
			{http.MethodPost, "/agentassistproto.SrvAgentAssist/SendMcpClientInfo", jsonBody, `{"Request":{}}`},
			{http.MethodPost, "/agui", jsonBody, `{}`},
		} {
			code, body := do(c.method, c.path, origins, c.h, c.body)
			if code != http.StatusForbidden {
				t.Errorf("%s %s Origin %q: %d %s", c.method, c.path, origins, code, body)
				continue
			}
			var e struct{ Code string }
			if strings.HasPrefix(c.path, "/agentassistproto.") && (json.Unmarshal([]byte(body), &e) != nil || e.Code != "permission_denied") {
				t.Errorf("%s Origin %q: %s", c.path, origins, body)
			}
		}
	}
}
