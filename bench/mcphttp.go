package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// mcpProtocol is the protocol MCP clients speak today (Claude Code,
// Cursor): the initialize handshake and a session.
const mcpProtocol = "2025-11-25"

// askOverMCP: ask_question, answered at once by a /ws client, through the
// server's own MCP endpoint (Streamable HTTP at /mcp), through
// agentassistant-mcp over stdio, and through Connect as agentassistant-mcp
// calls it, in rounds alternating with the floor's (the machine is shared:
// drift would move the comparison).
func askOverMCP(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := dialWS(ctx, s, "answerer", answer); err != nil {
		return err
	}

	overHTTP, err := client.NewStreamableHttpClient(s.url+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + s.token}))
	if err != nil {
		return err
	}
	defer func() { _ = overHTTP.Close() }()
	if err := initMCP(ctx, overHTTP, mcpProtocol); err != nil {
		return err
	}
	overStdio, err := startMCPStdio(ctx, c, s, mcpProtocol)
	if err != nil {
		return err
	}
	defer overStdio.close()
	ask := func(mc *client.Client) func(int) error {
		return func(int) error {
			_, err := callTool(ctx, mc, "ask_question", map[string]any{"question": "q?", "project_directory": "/bench"})
			return err
		}
	}
	cl := agentassistprotoconnect.NewSrvAgentAssistClient(httpClient(), s.url)
	overConnect := func(i int) error {
		_, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint("mcp-bench-", i), UserToken: s.token,
			Request: &pb.McpAskQuestionRequest{Question: "q?", Timeout: 60}})
		return err
	}

	paths := []struct {
		name string
		fn   func(int) error
		ds   []time.Duration
	}{
		{name: "MCP HTTP (/mcp)", fn: ask(overHTTP)},
		{name: "MCP stdio", fn: ask(overStdio.c)},
		{name: "Connect", fn: overConnect},
		{name: "floor: WebSocket echo", fn: fl.echo},
		{name: "floor: connect-go unary", fn: func(i int) error { return fl.unary(ctx, i) }},
	}
	const rounds = 10
	n := 0
	for round := range rounds {
		warm := 5
		if round == 0 {
			warm = 50
		}
		for i := range paths {
			p := &paths[i]
			base := n
			d, err := timed(max(1, c.mcpCalls/rounds), warm, func(j int) error { return p.fn(base + j) })
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			p.ds = append(p.ds, d...)
		}
		n += 1000
	}
	floorSum := pct(paths[3].ds, 50) + pct(paths[4].ds, 50)
	for _, p := range paths[:3] {
		r.add("ask via "+p.name+" p50", pct(p.ds, 50), "µs")
		r.add("ask via "+p.name+" p99", pct(p.ds, 99), "µs")
		r.add("ask via "+p.name+" p50 / floor alongside", pct(p.ds, 50)/floorSum, "×")
	}
	r.add("floor alongside the asks via MCP: WS echo + Connect p50", floorSum, "µs").Note =
		fmt.Sprintf("measured in rounds alternating with the calls above: %.1f + %.1f µs", pct(paths[3].ds, 50), pct(paths[4].ds, 50))
	return nil
}
