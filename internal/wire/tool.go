package wire

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Tool is one entry of a host's toolSchema, in either shape a host may
// publish: {name, description, parameters | inputSchema}, or OpenAI's
// function-calling {function: {name, description, parameters}}.
type Tool struct {
	Name        string
	Description string
	// Parameters is the tool's JSON Schema as published (nil when none).
	Parameters json.RawMessage
}

// ParseTool reads a toolSchema entry. A field of the wrong type is left
// empty, as is everything of an entry that is not a JSON object: a Tool
// without a name, which every reader skips.
func ParseTool(entry json.RawMessage) Tool {
	var t struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Function    *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	_ = json.Unmarshal(entry, &t) // on a type error, the fields that fit are kept
	if t.Name == "" && t.Function != nil {
		return Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}
	}
	params := t.Parameters
	if len(params) == 0 {
		params = t.InputSchema
	}
	return Tool{Name: t.Name, Description: t.Description, Parameters: params}
}

// BridgeTools are the MCP bridge's own tools. A host tool of one of these
// names is not listed as an MCP tool of its own: call_ui_tool reaches it.
var BridgeTools = []string{"ask_question", "task_finish", "work_report", "get_ui_state", "call_ui_tool", "send_agent_message",
	"wait_user_message", "start_session", "end_session"}

var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NameRule is what a name of the relay's world may be: a relay session's,
// an AG-UI thread's, a client tool's.
const NameRule = "1 to 64 letters, digits, '.', '_' or '-'"

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidName reports whether name follows NameRule.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// MCPName is a host tool's name as the agent sees it: '.' becomes '_'
// (MCP clients refuse dots; Ingress and AG-UI tools often have them).
func MCPName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// Unlisted says why a host tool named name (as the agent sees it) is not
// listed as an MCP tool of its own, or "" when it is.
func Unlisted(name string) string {
	if slices.Contains(BridgeTools, name) {
		return "its name is one of the bridge's own tools"
	}
	if !mcpToolName.MatchString(name) {
		return "an MCP tool name is 1 to 64 letters, digits, '_' or '-'"
	}
	return ""
}

// Clip is s cut to at most n bytes (and whole UTF-8 characters) with an
// ellipsis when it was longer: for quoting what a peer sent in an error.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
