package mcpbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// uiTools exposes the host UI's tools (the relay's toolSchema) as MCP
// tools, plus the session and chat tools around them.
type uiTools struct {
	b   *bridge
	srv *server.MCPServer

	mu         sync.Mutex
	registered map[string]bool
	unlisted   map[string]bool // host tools logged as not listable, so each is logged once
	lastOnline time.Time       // when a state last showed the host online
}

const (
	maxSpecChars    = 20000 // keeps a result far under 25k tokens
	recentMessages  = 8
	maxMessageChars = 600
	maxUserWait     = 50 * time.Second // under the ~60s clients allow a call
)

func (u *uiTools) register() {
	s := u.srv
	addStrict(s, mcp.NewTool("get_ui_state",
		mcp.WithDescription("Read the web UI the person sees: its stage, the visible items with their ids, selections, the chat so far, and the tools allowed now. Call it before acting and whenever you are unsure of the state."),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
	), u.getState)
	addStrict(s, mcp.NewTool("call_ui_tool",
		mcp.WithDescription("Call one of the web UI's tools by name, as a click would. Prefer the UI's own tools when they are listed; use this when a tool is not (get_ui_state lists the tools allowed now)."),
		mcp.WithString("tool_name", mcp.Required(), mcp.Description("The tool, e.g. select, setQuantity, next, prev, postMessage.")),
		mcp.WithObject("params", mcp.Description("The tool's parameters, e.g. {\"itemId\": \"m1\"}.")),
		mcp.WithString("reason", mcp.Required(), mcp.Description("Why you take this action; shown to the participant and logged.")),
	), u.callGeneric)
	addStrict(s, mcp.NewTool("send_agent_message",
		mcp.WithDescription("Post a message to the participant's chat in the web UI (an explanation or a question). It does not change the UI state."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The message.")),
	), u.sendMessage)
	addStrict(s, mcp.NewTool("wait_user_message",
		mcp.WithDescription("Wait for the next message the participant types in the web UI's chat. Messages typed earlier are kept and returned first, one per call."),
		mcp.WithNumber("timeout", mcp.Description("Seconds to wait, 1 to 50 (default 30).")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
	), u.waitUser)
	addStrict(s, mcp.NewTool("start_session",
		mcp.WithDescription("Start a study session in the web UI: from now on every action is logged. Returns the session id."),
		mcp.WithString("study_id", mcp.Description("The study, e.g. pilot-01.")),
		mcp.WithString("participant_id", mcp.Description("The participant, e.g. P07.")),
	), u.startSession)
	addStrict(s, mcp.NewTool("end_session",
		mcp.WithDescription("End the study session: the log is closed and the web UI resets to its start. Returns the log file."),
		mcp.WithString("reason", mcp.Description("Why it ends, e.g. study-complete.")),
		mcp.WithDestructiveHintAnnotation(true),
	), u.endSession)
}

// sync makes the listed host tools those of state while the host is there
// or has been gone for less than HostGrace, and none after: it registers
// the new ones and removes the others (each change notifies
// tools/list_changed).
func (u *uiTools) sync(st *pb.UIState) {
	if st == nil {
		return
	}
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if st.GetHostOnline() {
		u.lastOnline = now
	}
	want := map[string]json.RawMessage{}
	if !u.lastOnline.IsZero() && now.Sub(u.lastOnline) < u.b.o.HostGrace {
		var entries []json.RawMessage
		if st.GetAllToolsJson() != "" && json.Unmarshal([]byte(st.GetAllToolsJson()), &entries) != nil {
			return
		}
		for _, e := range entries {
			name, _, _ := describeHostTool(e)
			if why := wire.Unlisted(name); why != "" {
				// call_ui_tool reaches it; get_ui_state says so
				if name != "" && !u.unlisted[name] && len(u.unlisted) < 1024 {
					u.unlisted[name] = true
					u.b.log.Info("host tool not listed as an MCP tool of its own; call_ui_tool reaches it", "tool", name, "why", why)
				}
				continue
			}
			if _, dup := want[name]; !dup {
				want[name] = e
			}
		}
	}
	var gone []string
	for name := range u.registered {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(u.registered, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		u.srv.DeleteTools(gone...) // notifies tools/list_changed
		u.b.log.Info("host tools left the tool list: the web UI's host is gone or no longer declares them", "tools", gone)
	}
	var add []server.ServerTool
	for _, e := range want {
		name, desc, schema := describeHostTool(e)
		if u.registered[name] {
			continue
		}
		u.registered[name] = true
		add = append(add, server.ServerTool{
			Tool:    mcp.NewToolWithRawSchema(name, desc, schema),
			Handler: u.hostTool(name),
		})
	}
	if len(add) == 0 {
		return
	}
	slices.SortFunc(add, func(a, b server.ServerTool) int { return strings.Compare(a.Tool.Name, b.Tool.Name) })
	func() {
		defer func() {
			if r := recover(); r != nil { // a hostile schema must not take the bridge down
				u.b.log.Warn("host tool schema refused", "err", r)
			}
		}()
		u.srv.AddTools(add...) // notifies tools/list_changed
	}()
}

// refresh asks the server for the tools it knows, within a second.
func (u *uiTools) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := u.b.be.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: u.b.o.RelaySession})
	if err == nil {
		u.sync(r.GetState())
	}
}

// describeHostTool reads a toolSchema entry: {name, description,
// parameters|inputSchema} or the OpenAI {function: {...}} shape. The
// schema gets a required "reason", which the protocol demands.
func describeHostTool(e json.RawMessage) (name, desc string, schema json.RawMessage) {
	t := wire.ParseTool(e)
	params := t.Parameters
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal(params, &s)
	props := map[string]json.RawMessage{}
	for k, v := range s.Properties {
		if k != "reason" && json.Valid(v) && len(v) > 0 && v[0] == '{' {
			props[k] = v
		}
	}
	props["reason"] = json.RawMessage(`{"type":"string","description":"Why you take this action; shown to the participant and logged."}`)
	req := []string{"reason"}
	for _, r := range s.Required {
		if _, ok := props[r]; ok && r != "reason" {
			req = append(req, r)
		}
	}
	schema, _ = json.Marshal(map[string]any{"type": "object", "properties": props, "required": req})
	desc = cmp.Or(strings.TrimSpace(t.Description), "A tool of the web UI.")
	desc += " (Web UI tool: acts as the participant's click would. Refused with the allowed tools if the current stage does not offer it.)"
	return t.Name, desc, schema
}

func (u *uiTools) hostTool(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.GetArguments()
		reason, _ := args["reason"].(string)
		params := make(map[string]any, len(args))
		for k, v := range args {
			if k != "reason" {
				params[k] = v
			}
		}
		return u.invoke(ctx, name, params, reason)
	}
}

func (u *uiTools) callGeneric(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, _ := req.GetArguments()["tool_name"].(string)
	reason, _ := req.GetArguments()["reason"].(string)
	params, _ := req.GetArguments()["params"].(map[string]any)
	if strings.TrimSpace(name) == "" {
		return mcp.NewToolResultError("call_ui_tool needs \"tool_name\"."), nil
	}
	return u.invoke(ctx, name, params, reason)
}

func (u *uiTools) invoke(ctx context.Context, name string, params map[string]any, reason string) (*mcp.CallToolResult, error) {
	if strings.TrimSpace(reason) == "" {
		return mcp.NewToolResultError("Every UI action needs a \"reason\": say why you take it."), nil
	}
	r, err := u.b.be.CallUITool(ctx, u.b.o.RelaySession, name, params, reason)
	if err != nil {
		return mcp.NewToolResultError(u.transportError(ctx, err)), nil
	}
	u.sync(r.GetState())
	head := "ok: " + name
	if e := r.GetError(); e != nil {
		head = fmt.Sprintf("error %s: %s", e.GetCode(), e.GetMessage())
	}
	res := mcp.NewToolResultText(head + hostResult(r.GetResultJson()) + "\n" + u.describe(r.GetState(), r.GetError()))
	res.IsError = r.GetError() != nil
	return res, nil
}

func (u *uiTools) getState(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, err := u.b.be.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: u.b.o.RelaySession, Refresh: true})
	if err != nil {
		return mcp.NewToolResultError(u.transportError(ctx, err)), nil
	}
	u.sync(r.GetState())
	if e := r.GetError(); e != nil {
		res := mcp.NewToolResultText(fmt.Sprintf("error %s: %s\n%s", e.GetCode(), e.GetMessage(), u.describe(r.GetState(), e)))
		res.IsError = true
		return res, nil
	}
	return mcp.NewToolResultText(u.describe(r.GetState(), nil)), nil
}

func (u *uiTools) sendMessage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, _ := req.GetArguments()["text"].(string)
	if strings.TrimSpace(text) == "" {
		return mcp.NewToolResultError("send_agent_message needs \"text\"."), nil
	}
	r, err := u.b.be.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: u.b.o.RelaySession, Text: text})
	if res := u.failed(ctx, err, r.GetError()); res != nil {
		return res, nil
	}
	return mcp.NewToolResultText("Message posted to the participant's chat."), nil
}

func (u *uiTools) waitUser(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	secs, err := secondsArg(req, "timeout", fmt.Sprintf("(1 to %d), e.g. 30", int(maxUserWait.Seconds())))
	if err != nil {
		return badArgs("wait_user_message", err)
	}
	if v := req.GetArguments()["timeout"]; v == nil {
		secs = 30
	}
	d := clampSeconds(secs, time.Second, maxUserWait)
	ms := int32(d.Milliseconds()) //nolint:gosec // G115: at most maxUserWait, 50,000
	r, err := u.b.be.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: u.b.o.RelaySession, TimeoutMs: ms})
	if err != nil {
		return mcp.NewToolResultError(u.transportError(ctx, err)), nil
	}
	if !r.GetReceived() {
		return mcp.NewToolResultText(fmt.Sprintf("No message from the participant within %d seconds.", int(d.Seconds()))), nil
	}
	// The message may come with new tools (an AG-UI run declares its
	// tools with its user message): the agent may call them as soon as
	// it reads the message, so they are listed before it does.
	u.refresh(ctx)
	txt := "The participant wrote: " + r.GetText()
	if r.GetStage() != "" {
		txt += "\n(stage: " + r.GetStage() + ")"
	}
	var p struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal([]byte(r.GetPayloadJson()), &p) == nil && p.RunID != "" {
		// From an Ingress client: the run ends when the agent waits again.
		txt += "\n(Ingress run " + p.RunID + ": your send_agent_message calls stream to the client; calling wait_user_message again ends the run.)"
	}
	return mcp.NewToolResultText(txt), nil
}

func (u *uiTools) startSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, err := u.b.be.StartSession(ctx, &pb.StartSessionRequest{
		RelaySession: u.b.o.RelaySession, StudyId: req.GetString("study_id", ""), ParticipantId: req.GetString("participant_id", ""),
	})
	if res := u.failed(ctx, err, r.GetError()); res != nil {
		return res, nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("Study session %s started; every action is logged from now on. Call get_ui_state to see the UI.", r.GetStudySessionId())), nil
}

func (u *uiTools) endSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, err := u.b.be.EndSession(ctx, &pb.EndSessionRequest{RelaySession: u.b.o.RelaySession, Reason: req.GetString("reason", "")})
	if res := u.failed(ctx, err, r.GetError()); res != nil {
		return res, nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("Study session %s ended; the UI was reset. Log file: %s (in the server's data directory).",
		r.GetStudySessionId(), r.GetLogFile())), nil
}

// failed is the result of a call that did not reach the relay (err) or
// that the relay refused (e); nil when it did neither.
func (u *uiTools) failed(ctx context.Context, err error, e *pb.RelayError) *mcp.CallToolResult {
	if err != nil {
		return mcp.NewToolResultError(u.transportError(ctx, err))
	}
	if e != nil {
		return mcp.NewToolResultError(fmt.Sprintf("error %s: %s%s", e.GetCode(), e.GetMessage(), u.hint(e)))
	}
	return nil
}

// hint adds what to do about an error the agent cannot fix by itself.
func (u *uiTools) hint(e *pb.RelayError) string {
	if e.GetCode() == wire.SessionNotActive {
		// The relay says session.start, the /agent/ws agent's message.
		return "\nNo study session is active: call start_session first."
	}
	if e.GetCode() == wire.NoActiveSpec {
		return fmt.Sprintf("\nNo web UI is connected to relay session %q. Ask the person to open %s/booking?token=<their token> in a browser "+
			"(or to start the AG-UI frontend on thread %[1]q, or the Ingress client on session %[1]q), then try again.", cmp.Or(u.b.o.RelaySession, "default"), u.b.o.ServerURL)
	}
	return ""
}

func (u *uiTools) transportError(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "The call was cancelled; the action may or may not have happened."
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return fmt.Sprintf("agentassistant-srv at %s rejected the token. Set agentassistant_server_token (or -token) to the server's token.", u.b.o.ServerURL)
	case connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return "agentassistant-srv did not answer in time; the action may or may not have happened. Call get_ui_state to check."
	}
	if !u.b.fromServer(err) && isConnError(err) {
		return fmt.Sprintf("Could not reach agentassistant-srv at %s (%s). Ask the person to start it.", u.b.o.ServerURL, rootCause(err))
	}
	return fmt.Sprintf("agentassistant-srv at %s answered %s: %s", u.b.o.ServerURL, connect.CodeOf(err), connectMessage(err))
}

// describe renders the UI state compactly for the agent: stage, allowed
// tools, visible state, recent chat.
func (u *uiTools) describe(st *pb.UIState, e *pb.RelayError) string {
	var b strings.Builder
	if st == nil || (!st.GetHostOnline() && st.GetUiSpecJson() == "") {
		b.WriteString("The web UI (host) is not connected.")
		b.WriteString(u.hint(&pb.RelayError{Code: wire.NoActiveSpec}))
		return b.String()
	}
	if !st.GetHostOnline() {
		b.WriteString("The web UI (host) is disconnected; this is the last state it published.\n")
	}
	var spec map[string]any
	_ = json.Unmarshal([]byte(st.GetUiSpecJson()), &spec)
	if stage, ok := spec["stage"].(string); ok {
		fmt.Fprintf(&b, "stage: %s\n", stage)
	}
	if sid := st.GetStudySessionId(); sid != "" {
		fmt.Fprintf(&b, "study session: %s\n", sid)
	} else {
		b.WriteString("study session: none active (start_session before acting)\n")
	}
	var allowed []string
	var schema []json.RawMessage
	_ = json.Unmarshal([]byte(st.GetToolSchemaJson()), &schema)
	for _, s := range schema {
		if n, _, _ := describeHostTool(s); n != "" {
			if why := wire.Unlisted(n); why != "" {
				n += " (only through call_ui_tool: " + why + ")"
			}
			allowed = append(allowed, n)
		}
	}
	fmt.Fprintf(&b, "tools allowed now: %s\n", strings.Join(allowed, ", "))
	specJSON := st.GetUiSpecJson()
	if len(specJSON) > maxSpecChars {
		specJSON = specJSON[:maxSpecChars] + " …(truncated; call get_ui_state for a fresh view)"
	}
	fmt.Fprintf(&b, "visible state (uiSpec): %s\n", specJSON)
	var hist []json.RawMessage
	_ = json.Unmarshal([]byte(st.GetMessageHistoryJson()), &hist)
	if n := len(hist); n > 0 {
		start := max(0, n-recentMessages)
		fmt.Fprintf(&b, "chat (last %d of %d):\n", n-start, n)
		for _, m := range hist[start:] {
			s := string(m)
			if len(s) > maxMessageChars {
				s = s[:maxMessageChars] + "…"
			}
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
