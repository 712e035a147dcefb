package mcpbridge_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// TestNewToolBeforeUserMessage: an AG-UI run declares a tool and brings
// the user's message; when wait_user_message hands the message to the
// agent, the run's tool is already the bridge's, so calling it at once
// reaches the server (here: no study session yet) instead of failing
// with "tool not found". The bridge's poll is too slow to help.
func TestNewToolBeforeUserMessage(t *testing.T) {
	c, url := bridgeOverServer(t, "th")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/agui", strings.NewReader(
		`{"threadId":"th","runId":"r1","tools":[{"name":"paint","parameters":{"type":"object"}}],"messages":[{"id":"u1","role":"user","content":"paint it"}]}`))
	req.Header.Set("Authorization", "Bearer "+relayToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })

	wait := mcp.CallToolRequest{}
	wait.Params.Name, wait.Params.Arguments = "wait_user_message", map[string]any{"timeout": 10}
	r, err := c.CallTool(context.Background(), wait)
	if err != nil || r.IsError || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "paint it") {
		t.Fatalf("wait_user_message = %v, %v", r, err)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = "paint", map[string]any{"reason": "asked"}
	r, err = c.CallTool(context.Background(), call)
	if err != nil {
		t.Fatalf("the run's tool, called right after its user message: %v", err)
	}
	if txt := r.Content[0].(mcp.TextContent).Text; !strings.Contains(txt, "SESSION_NOT_ACTIVE") {
		t.Fatalf("the call did not reach the server: %s", txt)
	}
}

// TestUnlistedToolsAreNamed: a host tool the bridge cannot list as an MCP
// tool of its own (its name is a bridge tool's, or has other characters)
// is named where the agent reads the tools (get_ui_state), with the way
// to reach it.
func TestUnlistedToolsAreNamed(t *testing.T) {
	c, url := bridgeOverServer(t, "un")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/agui", strings.NewReader(
		`{"threadId":"un","runId":"r1","tools":[{"name":"page.paint"},{"name":"get_ui_state"},{"name":"paint it"}]}`))
	req.Header.Set("Authorization", "Bearer "+relayToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	// The run publishes its tools after RUN_STARTED, and says which names
	// the agent cannot list in a CUSTOM event then: wait for it.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"CUSTOM"`) {
			break
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	get := mcp.CallToolRequest{}
	get.Params.Name = "get_ui_state"
	r, err := c.CallTool(context.Background(), get)
	if err != nil {
		t.Fatal(err)
	}
	txt := r.Content[0].(mcp.TextContent).Text
	for _, want := range []string{"page_paint", "get_ui_state (only through call_ui_tool", "paint it (only through call_ui_tool"} {
		if !strings.Contains(txt, want) {
			t.Errorf("get_ui_state lacks %q:\n%s", want, txt)
		}
	}
	l, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range l.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "page_paint") || slices.Contains(names, "paint it") {
		t.Errorf("tools listed: %v", names)
	}
}

// bridgeOverServer serves the whole server and a bridge of relay session
// session to an in-process MCP client, whose host tools the bridge's poll
// never refreshes.
func bridgeOverServer(t *testing.T, session string) (*client.Client, string) {
	t.Helper()
	o := overServer(t, mcpbridge.Options{RelaySession: session, HostPoll: time.Hour})
	return mcpbridge.Connected(t, mcpbridge.New(o).MCPServer, mcp.InitializeRequest{}), o.ServerURL
}

// TestWaitUserTimeoutMistyped: wait_user_message's timeout of "2m" is
// refused saying how to write it, rather than read as its default.
func TestWaitUserTimeoutMistyped(t *testing.T) {
	c, _ := bridgeOverServer(t, "th")
	wait := mcp.CallToolRequest{}
	wait.Params.Name, wait.Params.Arguments = "wait_user_message", map[string]any{"timeout": "2m"}
	r, err := c.CallTool(context.Background(), wait)
	if err != nil {
		t.Fatal(err)
	}
	if txt := r.Content[0].(mcp.TextContent).Text; !r.IsError || !strings.Contains(txt, `"timeout" is a number of seconds (1 to 50)`) {
		t.Errorf("wait_user_message with timeout \"2m\": %v %q", r.IsError, txt)
	}
}

// TestCallUIToolWithoutParams: call_ui_tool without params sends the
// host's tool an empty object, not null, which the server refuses as
// no parameters; the call goes on to the relay session (here: no UI).
func TestCallUIToolWithoutParams(t *testing.T) {
	c, _ := bridgeOverServer(t, "np")
	call := mcp.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = "call_ui_tool", map[string]any{"tool_name": "next", "reason": "asked"}
	r, err := c.CallTool(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if txt := r.Content[0].(mcp.TextContent).Text; !strings.Contains(txt, "error NO_ACTIVE_SPEC") {
		t.Fatalf("call_ui_tool without params: %s", txt)
	}
}
