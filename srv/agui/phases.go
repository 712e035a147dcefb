package agui

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// What a run brings to its thread: phase two's tool results for the
// waiting calls, the user's message for the agent, and the run's tools
// as the relay session's tools.

// codeInvalidResult is RUN_ERROR's code for a tool result that matches
// no waiting call.
const codeInvalidResult = "invalid_tool_result"

// trailingResults is the tool messages that end in's messages (phase
// two's results).
func trailingResults(in *RunAgentInput) []Message {
	first := len(in.Messages)
	for first > 0 && in.Messages[first-1].Role == "tool" {
		first--
	}
	return in.Messages[first:]
}

func noCallWaiting(callID, thread string) string {
	return fmt.Sprintf("no tool call %q is waiting for a result in thread %q", wire.Clip(callID, 64), thread)
}

// result is a tool message to deliver in phase two.
type result struct {
	id, name string
	msg      Message
}

// plan reads what the run brings: the tool results after the last other
// message (phase two), or the user message that ends it. Every result is
// checked before any is delivered, so a bad one changes nothing; a result
// delivered before (a retried request) is skipped.
func (t *thread) plan(in *RunAgentInput) ([]result, *Message, error) {
	n := len(in.Messages)
	tail := trailingResults(in)
	first := n - len(tail)
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []result
	seen := make(map[string]bool, len(tail))
	for _, m := range tail {
		id := m.callID()
		if seen[id] { // the agent would get one, and the frontend not know which
			return nil, nil, fmt.Errorf("this run answers tool call %q twice: give one result for each call", wire.Clip(id, 64))
		}
		seen[id] = true
		name, delivered := t.done[id]
		if !delivered {
			var waiting bool
			if name, waiting = t.calls[id]; !waiting {
				return nil, nil, errors.New(noCallWaiting(id, t.id))
			}
		}
		if m.ToolName != "" && m.ToolName != name {
			return nil, nil, fmt.Errorf("tool result for %q names tool %q, but that call was to %q", id, wire.Clip(m.ToolName, 64), name)
		}
		if !delivered { // else a retry
			out = append(out, result{id: id, name: name, msg: m})
		}
	}
	if first == n && n > 0 && in.Messages[n-1].Role == "user" {
		m := in.Messages[n-1]
		if m.ID == "" || !t.users[m.ID] {
			if m.ID != "" {
				if len(t.users) >= maxDone {
					t.users = map[string]bool{}
				}
				t.users[m.ID] = true
			}
			return out, &m, nil
		}
	}
	return out, nil, nil
}

// toolName is how a frontend tool's name reaches the agent.
type toolName struct {
	Name     string `json:"name"`              // the frontend's
	Agent    string `json:"mcpName,omitempty"` // the agent's, when not the same
	Unlisted string `json:"note,omitempty"`    // why it is not an MCP tool of its own
}

// agentNames maps the run's tools to the names the agent calls them by:
// '.' becomes '_' (as for an Ingress client's tools) unless another tool
// already has that name. It returns what the frontend should be told:
// the renamed tools, and those the MCP bridge cannot list under their own
// name (call_ui_tool reaches them).
func agentNames(tools []Tool) (names []string, notice []toolName) {
	taken := make(map[string]bool, len(tools))
	for _, tl := range tools {
		taken[tl.Name] = true
	}
	names = make([]string, len(tools))
	for i, tl := range tools {
		n := wire.MCPName(tl.Name)
		if n != tl.Name && taken[n] {
			n = tl.Name // a.b beside a_b keeps its name
		}
		taken[n] = true
		names[i] = n
		tn := toolName{Name: tl.Name}
		if n != tl.Name {
			tn.Agent = n
		}
		if why := wire.Unlisted(n); why != "" {
			tn.Unlisted = "not an MCP tool of its own (" + why + "): the agent reaches it through call_ui_tool"
		}
		if tn.Agent != "" || tn.Unlisted != "" {
			notice = append(notice, tn)
		}
	}
	return names, notice
}

// publish makes the run's tools and state the relay session's. It returns
// what the frontend is told about its tools' names (see agentNames), or
// the relay's refusal (past the token's budget): then the thread keeps
// its earlier tools and state too.
func (t *thread) publish(in *RunAgentInput) ([]toolName, error) {
	names, notice := agentNames(in.Tools)
	schema := make([]map[string]any, 0, len(in.Tools))
	tools := make(map[string]string, 2*len(in.Tools))
	for i, tl := range in.Tools {
		e := map[string]any{"name": names[i], "description": tl.Description}
		if len(tl.Parameters) > 0 && string(tl.Parameters) != "null" {
			e["parameters"] = tl.Parameters
		} else {
			e["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		schema = append(schema, e)
		if _, ok := tools[tl.Name]; !ok {
			tools[tl.Name] = tl.Name
		}
		tools[names[i]] = tl.Name
	}
	state := in.State
	if len(state) == 0 || string(state) == "null" {
		state = json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]any{"uiSpec": state, "toolSchema": schema})
	if err := t.Ext.Send(relay.Envelope{Type: wire.TypeStateUpdated, Payload: b}); err != nil {
		return nil, fmt.Errorf("publish the run's state and tools: %w", err)
	}
	t.mu.Lock()
	t.state, t.tools = state, tools
	t.mu.Unlock()
	return notice, nil
}

// deliverResults answers the waiting tool calls (phase two).
func (t *thread) deliverResults(rs []result) {
	for _, r := range rs {
		t.mu.Lock()
		delete(t.calls, r.id)
		if len(t.done) >= maxDone {
			t.done = map[string]string{}
		}
		t.done[r.id] = r.name
		state := t.state
		t.mu.Unlock()
		var content any = r.msg.text()
		if raw := json.RawMessage(r.msg.text()); json.Valid(raw) {
			content = raw
		}
		p := map[string]any{"ok": r.msg.Error == "", "result": content, "uiSpec": state}
		if r.msg.Error != "" {
			p["code"], p["message"] = wire.ToolExecutionFailed, r.msg.Error
		}
		b, _ := json.Marshal(p)
		// An answer reaches its agent even when its state is not kept.
		_ = t.Ext.Send(relay.Envelope{Type: wire.TypeToolResult, ReplyTo: r.id, Payload: b})
	}
}

// postUser gives the agent what the person typed (wait_user_message), or
// returns the relay's refusal (past the token's budget).
func (t *thread) postUser(m Message) error {
	b, _ := json.Marshal(map[string]string{"text": m.text()})
	if err := t.Ext.Send(relay.Envelope{Type: wire.TypeUserMessage, Payload: b}); err != nil {
		return fmt.Errorf("post the user's message: %w", err)
	}
	return nil
}

// unplan forgets that plan took user message m: it did not reach the
// agent, so the same message sent again is posted, not skipped.
func (t *thread) unplan(m *Message) {
	if m == nil || m.ID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.users, m.ID)
}

// Codes of RUN_ERROR for what the relay did not take (its per-token
// budget, [relay] max_state_bytes_per_token).
const (
	codeStateNotKept   = "state_not_kept"
	codeMessageNotSent = "message_not_taken"
)
