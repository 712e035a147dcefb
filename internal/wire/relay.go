package wire

// Version is the relay protocol version every /agent/ws envelope carries.
const Version = "mvp-0.2"

// Error codes of the relay protocol (seed section 5): the code of an
// "error" envelope, and of the RelayError the Connect UI service returns.
const (
	InvalidMessage      = "INVALID_MESSAGE"
	SessionNotActive    = "SESSION_NOT_ACTIVE"
	UnknownTool         = "UNKNOWN_TOOL"
	InvalidParams       = "INVALID_PARAMS"
	NoActiveSpec        = "NO_ACTIVE_SPEC"
	ToolExecutionFailed = "TOOL_EXECUTION_FAILED"
)

// Message types of the relay protocol.
const (
	TypeJoin           = "relay.join"
	TypeJoined         = "relay.joined"
	TypeReplaced       = "relay.replaced" // ours: the older host is told a newer one took over
	TypePresence       = "relay.presence" // ours: agents learn when the host comes and goes
	TypeSession        = "relay.session"  // ours: the host learns the study session id, however it started
	TypeSessionStart   = "session.start"
	TypeSessionStarted = "session.started"
	TypeSnapshotGet    = "snapshot.get"
	TypeSnapshotState  = "snapshot.state"
	TypeToolCall       = "tool.call"
	TypeToolResult     = "tool.result"
	TypeAgentMessage   = "agent.message"
	TypeStateUpdated   = "state.updated"
	TypeUserMessage    = "user.message"
	TypeSessionEnd     = "session.end"
	TypeSessionEnded   = "session.ended"
	TypeError          = "error"
)
