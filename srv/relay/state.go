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
// was.
func (ch *channel) absorbState(payload json.RawMessage, authoritative bool) *Error {
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
		ch.learnTools(p.ToolSchema)
	}
	if !ch.charge(false) {
		ch.uiSpec, ch.messageHistory, ch.toolSchema, ch.tools, ch.toolIndex = uiSpec, messageHistory, toolSchema, tools, toolIndex
		return ch.overBudget("this state")
	}
	if authoritative {
		ch.stateVersion++
		close(ch.stateWake)
		ch.stateWake = make(chan struct{})
	}
	return nil
}

// learnTools adds the tools of a stage-filtered toolSchema to the set of
// every tool the host has declared, which is what the MCP bridge exposes.
func (ch *channel) learnTools(schema json.RawMessage) {
	var entries []json.RawMessage
	if json.Unmarshal(schema, &entries) != nil {
		return
	}
	for _, e := range entries {
		name := wire.ParseTool(e).Name
		if name == "" {
			continue
		}
		if i, ok := ch.toolIndex[name]; ok {
			ch.tools[i] = e
			continue
		}
		if len(ch.tools) >= 256 {
			return
		}
		ch.toolIndex[name] = len(ch.tools)
		ch.tools = append(ch.tools, e)
	}
}
