package wire

// The Ingress client protocol (seed 003) on /ingress/ws: JSON messages
// with a "type", one per WebSocket text frame.

// Client → server message types.
const (
	IngressHello            = "hello"
	IngressAgentInvoke      = "agent_invoke"
	IngressToolResult       = "tool_result"
	IngressApprovalDecision = "approval_decision"
	IngressCancelRun        = "cancel_run"
)

// Server → client event types.
const (
	IngressHelloAck         = "hello_ack"
	IngressRunStarted       = "run_started"
	IngressDelta            = "delta"
	IngressState            = "state"
	IngressToolRequest      = "tool_request"
	IngressApprovalRequired = "approval_required"
	IngressError            = "error"
	IngressDone             = "done"
)

// Error codes of the Ingress protocol (seed 003, 错误码定义): the code of
// an "error" event, and of /internal/send's refusals.
const (
	IngressInvalidMessage    = "invalid_message"
	IngressAuthFailed        = "auth_failed"
	IngressSessionNotFound   = "session_not_found"
	IngressClientOffline     = "client_offline"
	IngressOrchestratorError = "orchestrator_error"
	IngressInternalError     = "internal_error"
)

// Decisions of approval_decision.
const (
	IngressApprove = "approve"
	IngressReject  = "reject"
)

// States of "state" events that ours adds to the orchestrator's own.
const (
	IngressStateRunning   = "RUNNING"   // an approval was granted; the run goes on
	IngressStateRejected  = "REJECTED"  // an approval was refused
	IngressStateCancelled = "CANCELLED" // the run was cancelled (cancel_run, or its last device left)
	IngressStateNoAgent   = "NO_AGENT"  // no agent took the run's message in time (built-in orchestrator); an error follows
	IngressStateExpired   = "TOOL_EXPIRED"
)
