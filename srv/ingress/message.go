package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// Message is any message a client sends (seed 003, 数据模型): the base
// fields and those of every client message type. Which fields matter
// depends on Type; Parse checks them.
type Message struct {
	Type      string `json:"type"`
	Ts        int64  `json:"ts"`
	RequestID string `json:"request_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	RunID     string `json:"run_id,omitempty"`

	// hello
	UserID     string          `json:"user_id,omitempty"`
	APIKey     string          `json:"api_key,omitempty"`
	ClientMeta json.RawMessage `json:"client_meta,omitempty"`
	// LastSeq is ours: a device that reconnects to its session names the
	// last event it has, and gets what it missed (the replay window).
	LastSeq *uint64 `json:"last_seq,omitempty"`

	// agent_invoke
	AgentID string       `json:"agent_id,omitempty"`
	Message *ChatMessage `json:"message,omitempty"`

	// tool_result
	ToolCallID string          `json:"tool_call_id,omitempty"`
	OK         bool            `json:"ok,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`

	// approval_decision
	ApprovalID string `json:"approval_id,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// ChatMessage is agent_invoke's message.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Event is every message the server sends a client: the base fields and
// those of every event type, the empty ones left out.
type Event struct {
	Type      string `json:"type"`
	Ts        int64  `json:"ts"`
	RequestID string `json:"request_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	// Seq is ours: the event's number in its session, for a device that
	// reconnects (Message.LastSeq). Replies to one device carry none.
	Seq uint64 `json:"seq,omitempty"`

	AgentID     string          `json:"agent_id,omitempty"`
	Text        string          `json:"text,omitempty"`
	State       string          `json:"state,omitempty"`
	Detail      json.RawMessage `json:"detail,omitempty"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	ToolName    string          `json:"tool_name,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	DeadlineTs  int64           `json:"deadline_ts,omitempty"`
	ApprovalID  string          `json:"approval_id,omitempty"`
	ArgsSummary string          `json:"args_summary,omitempty"`
	Code        string          `json:"code,omitempty"`
	Message     string          `json:"message,omitempty"`
	Usage       json.RawMessage `json:"usage,omitempty"`

	// hello_ack (ours, beyond session_id): the last event number of the
	// session, and whether events the device asked for were no longer kept.
	LastSeq  *uint64 `json:"last_seq,omitempty"`
	Replayed int     `json:"replayed,omitempty"`
	Gap      bool    `json:"gap,omitempty"`
}

// terminal reports whether ev ends its run.
func (ev *Event) terminal() bool {
	return ev.RunID != "" && (ev.Type == wire.IngressDone || ev.Type == wire.IngressError)
}

// ClientMeta is hello's client_meta as this server reads it; other keys
// are the client's own and ignored.
type ClientMeta struct {
	App     string `json:"app"`
	Version string `json:"version"`
	// Session names the relay session whose MCP agent is the built-in
	// orchestrator ("" is "default").
	Session string `json:"session"`
	// Tools are the client tools the agent may call (built-in
	// orchestrator): each becomes an MCP tool whose call is a
	// tool_request.
	Tools []ClientTool `json:"tools"`
}

// ClientTool is a tool a client declares it runs.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// RequiresApproval makes each call wait for an approval_decision
	// (or the person's answer in the inbox) before it is sent.
	RequiresApproval bool `json:"requires_approval"`
}

// Error is an "error" event's code and message, and the error of a
// handler step that becomes one.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	idPattern = regexp.MustCompile(`^[A-Za-z0-9._:~-]{1,128}$`)
)

const (
	maxTools      = 64
	maxContent    = 1 << 20
	maxReason     = 4096
	maxUserIDLen  = 128
	maxSummaryLen = 4096
)

// Parse decodes and checks one client frame. The message is returned
// even with an error when its type and request_id could be read, so the
// error can name them.
func Parse(data []byte) (Message, *Error) {
	var m Message
	if !utf8.Valid(data) {
		return m, errorf(wire.IngressInvalidMessage, "frame is not valid UTF-8")
	}
	var probe struct {
		Type      json.RawMessage `json:"type"`
		RequestID json.RawMessage `json:"request_id"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return m, errorf(wire.IngressInvalidMessage, "frame is not a JSON object: %s", jsonProblem(err))
	}
	_ = json.Unmarshal(probe.Type, &m.Type)
	if rid := ""; json.Unmarshal(probe.RequestID, &rid) == nil && idPattern.MatchString(rid) {
		m.RequestID = rid
	}
	// A key given twice reads as its last (encoding/json, a JavaScript
	// orchestrator), while a check may have read the first: such a frame
	// has no one meaning, and what goes on (a result) would not be what
	// was checked.
	if err := strictjson.Check(data); err != nil {
		return m, errorf(wire.IngressInvalidMessage, "frame refused: %v", err)
	}
	if m.Type == "" {
		return m, errorf(wire.IngressInvalidMessage, `missing "type" (a string)`)
	}
	typ, rid := m.Type, m.RequestID
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		m.Type, m.RequestID = typ, rid
		return m, errorf(wire.IngressInvalidMessage, "%s: %s", wire.Clip(typ, 32), jsonProblem(err))
	}
	return m, m.check()
}

// check validates the fields m's type needs.
func (m *Message) check() *Error {
	bad := func(format string, args ...any) *Error {
		return errorf(wire.IngressInvalidMessage, m.Type+": "+format, args...)
	}
	for name, v := range map[string]string{"request_id": m.RequestID, "session_id": m.SessionID, "run_id": m.RunID,
		"tool_call_id": m.ToolCallID, "approval_id": m.ApprovalID, "agent_id": m.AgentID} {
		if v != "" && !idPattern.MatchString(v) {
			return bad("%s: 1 to 128 letters, digits, '.', '_', ':', '~' or '-'", name)
		}
	}
	switch m.Type {
	case wire.IngressHello:
		if strings.TrimSpace(m.UserID) == "" || len(m.UserID) > maxUserIDLen {
			return bad("user_id is required (at most %d bytes)", maxUserIDLen)
		}
		if c := bytes.TrimSpace(m.ClientMeta); len(c) > 0 && string(c) != "null" && c[0] != '{' {
			return bad("client_meta must be an object")
		}
	case wire.IngressAgentInvoke:
		if m.Message == nil || strings.TrimSpace(m.Message.Content) == "" {
			return bad("message.content is required")
		}
		if len(m.Message.Content) > maxContent {
			return bad("message.content: at most %d bytes", maxContent)
		}
		if m.Message.Role != "" && m.Message.Role != "user" {
			return bad(`message.role must be "user"`)
		}
	case wire.IngressToolResult:
		if m.ToolCallID == "" {
			return bad("tool_call_id is required")
		}
		if r := bytes.TrimSpace(m.Result); len(r) > 0 && !json.Valid(r) {
			return bad("result is not JSON")
		}
	case wire.IngressApprovalDecision:
		if m.ApprovalID == "" {
			return bad("approval_id is required")
		}
		if m.Decision != wire.IngressApprove && m.Decision != wire.IngressReject {
			return bad(`decision must be "approve" or "reject"`)
		}
		if len(m.Reason) > maxReason {
			return bad("reason: at most %d bytes", maxReason)
		}
	case wire.IngressCancelRun:
		if m.RunID == "" && m.RequestID == "" {
			return bad("run_id is required (or, for a run not started yet, the request_id of its agent_invoke)")
		}
	default:
		return errorf(wire.IngressInvalidMessage, "unknown message type %q", wire.Clip(m.Type, 32))
	}
	return nil
}

// meta reads hello's client_meta.
func (m *Message) meta() (ClientMeta, *Error) {
	var cm ClientMeta
	if c := bytes.TrimSpace(m.ClientMeta); len(c) > 0 && string(c) != "null" {
		if err := json.Unmarshal(c, &cm); err != nil {
			return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta: %s", jsonProblem(err))
		}
	}
	if cm.Session != "" && !wire.ValidName(cm.Session) {
		return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta.session: "+wire.NameRule)
	}
	if len(cm.Tools) > maxTools {
		return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta.tools: at most %d", maxTools)
	}
	seen := map[string]bool{}
	for i, t := range cm.Tools {
		if !wire.ValidName(t.Name) {
			return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta.tools[%d].name: "+wire.NameRule, i)
		}
		if seen[wire.MCPName(t.Name)] {
			return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta.tools[%d].name %q is declared twice", i, t.Name)
		}
		seen[wire.MCPName(t.Name)] = true
		if p := bytes.TrimSpace(t.Parameters); len(p) > 0 && string(p) != "null" && p[0] != '{' {
			return cm, errorf(wire.IngressInvalidMessage, "hello: client_meta.tools[%d].parameters must be a JSON schema object", i)
		}
	}
	return cm, nil
}

// jsonProblem says what is wrong with a JSON text in the protocol's
// words: the field and what it must be, not Go's types.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		want := "of another type"
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			want = "a whole number"
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "a whole number of 0 or more"
		case reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Struct, reflect.Map:
			want = "an object"
		}
		field := te.Field
		if field == "" {
			return "it is a JSON " + te.Value
		}
		if n, ok := strings.CutPrefix(te.Value, "number "); ok {
			return fmt.Sprintf("%s must be %s, not %s", field, want, n)
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s", field, want, te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	}
	return "not valid JSON"
}
