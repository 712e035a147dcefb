package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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

// TestDocumentedInspectorCallsTakeTheirArguments: the documentation shows
// how to call a tool by hand with the MCP Inspector's CLI (--tool-name,
// --tool-arg NAME=VALUE). A call whose argument the tool does not publish
// is refused ("unknown argument"), so every argument shown is one of the
// tool's, and the tool is one the bridge lists.
func TestDocumentedInspectorCallsTakeTheirArguments(t *testing.T) {
	const url = "http://127.0.0.1:1" // never called: listing asks no server
	c, err := client.NewInProcessClient(mcpbridge.New(mcpbridge.Options{
		Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url),
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
	args := map[string]map[string]any{}
	for _, tool := range l.Tools {
		args[tool.Name] = tool.InputSchema.Properties
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	name := regexp.MustCompile(`--tool-name\s+(\S+)`)
	arg := regexp.MustCompile(`(?:--tool-arg\s+|\s)'?([A-Za-z_]+)=`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			m := name.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			props, ok := args[m[1]]
			if !ok {
				t.Errorf("%s calls %s, which is no tool of the bridge", filepath.Base(f), m[1])
				continue
			}
			_, rest, _ := strings.Cut(line, "--tool-arg")
			for _, a := range arg.FindAllStringSubmatch(" "+rest, -1) {
				if _, ok := props[a[1]]; !ok {
					t.Errorf("%s calls %s with %q, which it does not take", filepath.Base(f), m[1], a[1])
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the documentation shows no tool call with the MCP Inspector")
	}
}

// TestDocumentedInspectorCallsSayTheInspectorGivesUp: a tools/call made
// with the MCP Inspector's CLI waits for a person, but the Inspector
// ends its own request after a minute (its request timeout, which the
// call's progress does not reset): a page that shows such a call says
// so, or a reader who answers later takes the Inspector's "Request timed
// out" for this server's fault.
func TestDocumentedInspectorCallsSayTheInspectorGivesUp(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "--method tools/call") {
			continue
		}
		n++
		if !strings.Contains(string(b), "Request timed out after 1m00s") {
			t.Errorf("%s shows a tools/call with the Inspector but not that the Inspector gives up after a minute", filepath.Base(f))
		}
	}
	if n == 0 {
		t.Fatal("the documentation shows no tool call with the MCP Inspector")
	}
}
