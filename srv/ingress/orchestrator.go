package ingress

import (
	"context"
	"encoding/json"
	"errors"
)

// Orchestrator runs agents for Ingress sessions (seed 003, 与 Orchestrator
// 通信): an external one over HTTP and SSE (HTTPOrchestrator), or the
// built-in one whose agent is the token's MCP agent (Builtin).
type Orchestrator interface {
	// Invoke runs req until the run ends. It calls started once with the
	// run's id before any event, then emit with each event of the run in
	// order (emit never blocks); it returns once the run's done or error
	// event was emitted (nil), or with why the run ended without one
	// (ctx's error once the run was cancelled). Invoke runs on a
	// goroutine of the Handler's, which waits for it.
	Invoke(ctx context.Context, req InvokeRequest, started func(runID string), emit func(Event)) error
	// SubmitToolResult answers a tool_request of a run.
	SubmitToolResult(ctx context.Context, toolCallID string, r ToolResult) error
	// Decide answers an approval_required of a run.
	Decide(ctx context.Context, approvalID string, d Decision) error
	// Cancel asks for a run to end; its Invoke then returns.
	Cancel(ctx context.Context, runID string) error
}

// SessionOpener is an Orchestrator that wants to know a session's client
// before any run: the built-in one publishes the client's tools to the
// agent at hello.
type SessionOpener interface {
	OpenSession(s SessionInfo)
	// CloseSession is called once the session is freed.
	CloseSession(s SessionInfo)
}

// SessionInfo names an Ingress session and its client.
type SessionInfo struct {
	Token     string
	SessionID string
	UserID    string
	Meta      ClientMeta
}

// InvokeRequest is one agent_invoke (the body of POST /internal/invoke).
type InvokeRequest struct {
	Session   SessionInfo `json:"-"`
	RequestID string      `json:"request_id,omitempty"`
	SessionID string      `json:"session_id"`
	UserID    string      `json:"user_id"`
	AgentID   string      `json:"agent_id,omitempty"`
	Message   ChatMessage `json:"message"`
}

// ToolResult is a client's tool_result (the body of POST
// /internal/tool_calls/:id/submit).
type ToolResult struct {
	RunID  string          `json:"run_id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Decision is an approval decision (the body of POST
// /internal/approvals/:id/decide). DecidedBy says where it was taken:
// "client" (an approval_decision) or "inbox" (the person's answer).
type Decision struct {
	RunID     string `json:"run_id"`
	Decision  string `json:"decision"`
	Reason    string `json:"reason,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// ErrRunOpen: the built-in orchestrator's agent is busy with another run.
var ErrRunOpen = errors.New("a run is open for this agent; wait for its done or cancel it")
