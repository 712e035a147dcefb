// An external test package: srv serves MCP itself with this package.
package mcpbridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/testhost"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

const relayToken = "relay-token-0123456789"

// TestHostToolsFollowTheHost: over a real server and relay, the booking
// page's tools are listed while it is there, removed (with list_changed)
// once it has been gone past the grace, and listed again when it returns.
func TestHostToolsFollowTheHost(t *testing.T) {
	o := overServer(t, mcpbridge.Options{HostGrace: 300 * time.Millisecond, HostPoll: 20 * time.Millisecond})
	b := mcpbridge.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	c := mcpbridge.Connected(t, b.MCPServer, mcp.InitializeRequest{})
	var changed atomic.Int32
	wake := make(chan struct{}, 1) // a list_changed came: look at changed
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			changed.Add(1)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	listed := func() bool {
		t.Helper()
		r, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(r.Tools, func(tl mcp.Tool) bool { return tl.Name == "select" })
	}
	// waitChange waits for a list_changed after n, then checks the list.
	waitChange := func(what string, n int32, want bool) int32 {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for changed.Load() <= n {
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("%s: no tools/list_changed", what)
			}
		}
		if got := listed(); got != want {
			t.Fatalf("%s: host tool listed = %v, want %v", what, got, want)
		}
		return changed.Load()
	}
	if listed() {
		t.Fatal("a host tool is listed before any host joined")
	}

	h, err := testhost.Dial(o.ServerURL, relayToken, testhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := waitChange("the host joined", 0, true)

	h.Close()
	n = waitChange("the host left and the grace passed", n, false)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "select", map[string]any{"itemId": "m1", "reason": "r"}
	if r, err := c.CallTool(context.Background(), req); err == nil && !r.IsError {
		t.Errorf("calling a host tool after the host left: %v", r)
	}

	h, err = testhost.Dial(o.ServerURL, relayToken, testhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	waitChange("the host came back", n, true)
}

// overServer serves the whole server until the test ends, and sets o's
// agent and relay clients, token and URL for a bridge over it.
func overServer(t *testing.T, o mcpbridge.Options) mcpbridge.Options {
	t.Helper()
	toks, err := auth.NewTokens(relayToken)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	header := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(auth.TokenHeader, relayToken)
			return next(ctx, req)
		}
	})
	o.Client = agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, ts.URL)
	o.UI = agentassistprotoconnect.NewSrvUIRelayClient(http.DefaultClient, ts.URL, connect.WithInterceptors(header))
	o.Token, o.ServerURL = relayToken, ts.URL
	return o
}
