package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tmaxmax/go-sse"

	"github.com/agentassistant/agentassistant/internal/testhost"
)

// aguiRoundTrip: the AG-UI frontend tool call, end to end. The real MCP
// client calls the frontend tool on agentassistant-mcp (-session of the
// thread); the server streams it to the frontend's open run as
// TOOL_CALL_START/ARGS/END and RUN_FINISHED (phase one); the frontend, a
// Go HTTP client reading the SSE with go-sse, posts the result alone in
// its next run (phase two), which the server hands to the waiting call;
// the MCP client has its result. Side by side, in alternating rounds on
// the same server: the same MCP call to the booking host over /agent/ws
// (select), and the floor's connect-go unary call.
func aguiRoundTrip(ctx context.Context, c config, r *report) error {
	s, err := startServer(c)
	if err != nil {
		return err
	}
	defer s.stop()
	const thread = "bench-agui"
	fe := &aguiFrontend{url: s.url + "/agui", token: s.token, thread: thread, http: httpClient()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feErr := make(chan error, 1)
	go func() { feErr <- fe.loop(ctx) }()
	defer func() { cancel(); logUnless(<-feErr, context.Canceled) }() // the frontend's open run ends with ctx
	h, err := testhost.Dial(s.url, s.token, testhost.Options{})       // the booking host of relay session default
	if err != nil {
		return err
	}
	defer h.Close()

	agui, err := startMCPStdio(ctx, c, s, mcp.LATEST_PROTOCOL_VERSION, "-session", thread)
	if err != nil {
		return err
	}
	defer agui.close()
	booking, err := startMCPStdio(ctx, c, s, mcp.LATEST_PROTOCOL_VERSION)
	if err != nil {
		return err
	}
	defer booking.close()
	// The thread is the host once its first run is open, and its tool is
	// listed (tools/list makes the bridge learn it).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := callTool(ctx, agui.c, "start_session", map[string]any{"study_id": "bench"}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return err
		}
	}
	if _, err := agui.c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		return err
	}
	if _, err := callTool(ctx, booking.c, "start_session", map[string]any{"study_id": "bench"}); err != nil {
		return err
	}
	colours, items := []string{"teal", "steelblue", "white"}, []string{"m1", "m2", "m3"}
	aguiCall := func(i int) error {
		out, err := callTool(ctx, agui.c, "change_background", map[string]any{"color": colours[i%3], "reason": "bench"})
		if err == nil && !strings.Contains(out, "status") {
			err = fmt.Errorf("change_background: %s", out)
		}
		return err
	}
	selectCall := func(i int) error {
		_, err := callTool(ctx, booking.c, "select", map[string]any{"itemId": items[i%3], "reason": "bench"})
		return err
	}
	var aguiDs, selectDs, floorDs []time.Duration
	const rounds = 10
	for range rounds {
		for _, m := range []struct {
			fn  func(int) error
			out *[]time.Duration
		}{{aguiCall, &aguiDs}, {selectCall, &selectDs}, {func(i int) error { return fl.unary(ctx, i) }, &floorDs}} {
			ds, err := timed(c.mcpCalls/rounds, 5, m.fn)
			if err != nil {
				return err
			}
			*m.out = append(*m.out, ds...)
		}
	}
	p50, sel50, floor50 := pct(aguiDs, 50), pct(selectDs, 50), pct(floorDs, 50)
	r.add("AG-UI: frontend tool call round trip through MCP p50", p50, "µs").Note =
		"MCP call → SSE TOOL_CALL_START/ARGS/END, RUN_FINISHED → phase-two POST /agui → MCP result"
	r.add("AG-UI: frontend tool call round trip through MCP p99", pct(aguiDs, 99), "µs")
	r.add("AG-UI: alongside, booking host select through MCP p50", sel50, "µs")
	r.add("AG-UI: alongside, booking host select through MCP p99", pct(selectDs, 99), "µs")
	r.add("AG-UI: alongside, floor connect-go unary p50", floor50, "µs")
	r.add("AG-UI: round trip p50 ÷ booking select p50", p50/sel50, "×")
	r.add("AG-UI: round trip p50 ÷ floor p50", p50/floor50, "×")
	return nil
}

// mcpStdio is the real MCP client over stdio with agentassistant-mcp.
type mcpStdio struct {
	c    *client.Client
	home string
}

// startMCPStdio starts agentassistant-mcp with args under an MCP client
// that speaks the protocol version.
func startMCPStdio(ctx context.Context, c config, s *server, version string, args ...string) (*mcpStdio, error) {
	home, err := os.MkdirTemp("", "aa-bench-home-")
	if err != nil {
		return nil, err
	}
	mc, err := client.NewStdioMCPClientWithOptions(filepath.Join(c.bin, "agentassistant-mcp"),
		[]string{"HOME=" + home, "XDG_CONFIG_HOME=" + home},
		append([]string{"-host", s.host, "-port", s.port, "-token", s.token, "-log-level", "warn"}, args...),
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...) // #nosec G204 -- the built agentassistant-mcp
			cmd.Env, cmd.Dir = env, home
			return cmd, nil
		}))
	if err != nil {
		_ = os.RemoveAll(home)
		return nil, err
	}
	m := &mcpStdio{c: mc, home: home}
	if err := initMCP(ctx, mc, version); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

func (m *mcpStdio) close() {
	_ = m.c.Close()
	_ = os.RemoveAll(m.home)
}

// initMCP starts mc and makes the initialize handshake at version.
func initMCP(ctx context.Context, mc *client.Client, version string) error {
	if err := mc.Start(ctx); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	_, err := mc.Initialize(ctx, init)
	return err
}

// callTool calls a tool and returns its content as JSON; a tool error is
// an error.
func callTool(ctx context.Context, mc *client.Client, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := mc.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(res.Content)
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, b)
	}
	return string(b), nil
}

// aguiFrontend is an AG-UI frontend with one frontend tool: it keeps a
// run open, and when a run ends with tool calls, answers them in the
// next run, as HttpAgent-based apps do.
type aguiFrontend struct {
	url, token, thread string
	http               *http.Client
	runs               int // owned by loop
}

func (f *aguiFrontend) loop(ctx context.Context) error {
	var results []map[string]any
	tools := []map[string]any{{"name": "change_background", "description": "Change the page background.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}, "required": []string{"color"}}}}
	for ctx.Err() == nil {
		in := map[string]any{"threadId": f.thread, "runId": fmt.Sprint("run-", f.runs), "messages": results, "tools": tools,
			"state": map[string]any{}, "context": []any{}, "forwardedProps": map[string]any{}}
		if results == nil {
			in["messages"] = []any{}
		}
		f.runs++
		ids, err := f.run(ctx, in)
		if err != nil {
			return err
		}
		results = nil
		for _, id := range ids {
			results = append(results, map[string]any{"id": "r-" + id, "role": "tool", "toolCallId": id, "content": `{"status":"ok"}`})
		}
	}
	return ctx.Err()
}

// run posts one run and reads its events to the end: the tool calls it
// streamed.
func (f *aguiFrontend) run(ctx context.Context, in map[string]any) ([]string, error) {
	b, _ := json.Marshal(in)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /agui: %s", resp.Status)
	}
	var ids []string
	for e, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			return nil, err
		}
		var ev struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			Message    string `json:"message"`
		}
		if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
			return nil, fmt.Errorf("AG-UI event %q: %w", e.Data, err)
		}
		switch ev.Type {
		case "TOOL_CALL_END":
			ids = append(ids, ev.ToolCallID)
		case "RUN_ERROR":
			return nil, fmt.Errorf("RUN_ERROR: %s", ev.Message)
		case "RUN_FINISHED":
			return ids, nil
		}
	}
	return ids, ctx.Err()
}

// logUnless prints err on stderr unless it is (or wraps) the expected one.
func logUnless(err, expected error) {
	if err != nil && !errors.Is(err, expected) {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}
