package relay

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// The host's published state, kept for agents that ask (Local.State), and
// the registry of every tool it has declared.

// statePayload is what absorbState keeps of a host's message.
type statePayload struct {
	UISpec         json.RawMessage `json:"uiSpec"`
	MessageHistory json.RawMessage `json:"messageHistory"`
	ToolSchema     json.RawMessage `json:"toolSchema"`
}

// absorbState keeps the host's latest published state. state.updated is
// authoritative (it bumps the version waiters watch); snapshots and tool
// results refresh what they carry. What would pass the token's budget
// (limits.go) is not kept: the error says so, and the state stays as it
// was. unlisted says what of its tools the agents are not listed (past
// maxTools), nil when they all are.
func (ch *channel) absorbState(payload json.RawMessage, authoritative bool) (unlisted, refused *Error) {
	var p statePayload
	if json.Unmarshal(payload, &p) != nil {
		p = statePayload{} // not an object: nothing in it to keep
	}
	uiSpec, messageHistory, toolSchema := ch.uiSpec, ch.messageHistory, ch.toolSchema
	tools, toolIndex := slices.Clone(ch.tools), maps.Clone(ch.toolIndex)
	if len(p.UISpec) > 0 && string(p.UISpec) != "null" {
		ch.uiSpec = p.UISpec
	}
	if len(p.MessageHistory) > 0 && string(p.MessageHistory) != "null" {
		ch.messageHistory = p.MessageHistory
	}
	if len(p.ToolSchema) > 0 && string(p.ToolSchema) != "null" {
		ch.toolSchema = p.ToolSchema
		if authoritative && ch.host != nil && ch.host.inRuns() {
			ch.tools, ch.toolIndex = nil, map[string]int{} // the latest set replaces the earlier ones
		}
		unlisted = ch.learnTools(p.ToolSchema)
	}
	if !ch.charge(false) {
		ch.uiSpec, ch.messageHistory, ch.toolSchema, ch.tools, ch.toolIndex = uiSpec, messageHistory, toolSchema, tools, toolIndex
		return nil, ch.overBudget("this state")
	}
	if authoritative {
		ch.stateVersion++
		close(ch.stateWake)
		ch.stateWake = make(chan struct{})
	}
	return unlisted, nil
}

// learnTools adds the tools of a stage-filtered toolSchema to the set of
// every tool the host has declared, which is what the MCP bridge exposes;
// past maxTools, the error says how many of schema's are left out.
func (ch *channel) learnTools(schema json.RawMessage) *Error {
	var entries []json.RawMessage
	_ = json.Unmarshal(schema, &entries) // not an array: no tools in it
	left := 0
	for _, e := range entries {
		name := wire.ParseTool(e).Name
		if name == "" {
			continue
		}
		if i, ok := ch.toolIndex[name]; ok {
			ch.tools[i] = e
			continue
		}
		if len(ch.tools) >= maxTools {
			left++
			continue
		}
		ch.toolIndex[name] = len(ch.tools)
		ch.tools = append(ch.tools, e)
	}
	if left == 0 {
		return nil
	}
	return errorf(wire.InvalidMessage, "the state is kept, but %d of its %d tools are not listed to agents: a relay session lists at most %d "+
		"tools of its host; agents reach the others through call_ui_tool", left, len(entries), maxTools)
}
