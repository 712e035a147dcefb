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
