package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// TestREADMENamesEveryTool: a reader who registers agentassistant-mcp as
// main does and looks at its tool list finds each tool in README.md, not
// only the three of its table.
func TestREADMENamesEveryTool(t *testing.T) {
	const url = "http://127.0.0.1:1" // never called: listing asks no server
	c, err := client.NewInProcessClient(mcpbridge.New(mcpbridge.Options{
		Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url),
		UI:     agentassistprotoconnect.NewSrvUIRelayClient(http.DefaultClient, url),
		Token:  "tok-123456789", ServerURL: url,
	}).MCPServer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tools) < 3 {
		t.Fatalf("the bridge lists %d tools", len(l.Tools))
	}
	for _, tool := range l.Tools {
		if !strings.Contains(string(readme), "`"+tool.Name+"`") {
			t.Errorf("README.md does not name the tool %s", tool.Name)
		}
	}
}
