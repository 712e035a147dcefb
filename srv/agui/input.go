package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// RunAgentInput is the body of POST /agui, as @ag-ui/core defines it.
type RunAgentInput struct {
	ThreadID       string          `json:"threadId"`
	RunID          string          `json:"runId"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools"`
	State          json.RawMessage `json:"state"`
	Context        json.RawMessage `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
}

// Message is one AG-UI message. A tool message names its call by
// toolCallId (AG-UI) or tool_id, with tool_name (the two-phase design's
// spelling).
type Message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	ToolID     string          `json:"tool_id"`
	ToolName   string          `json:"tool_name"`
	Error      string          `json:"error"`
}

// Tool is a frontend tool the run declares.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

const (
	maxMessages = 1000
	maxTools    = 256
)

// parseInput decodes and checks a RunAgentInput; the error says what is
// wrong in words a frontend developer can act on.
func parseInput(body []byte) (*RunAgentInput, error) {
	// encoding/json keeps the last of a key given twice: the run would
	// be another than the one its bytes show, and the state forwarded
	// as written another than the one checked.
	if err := strictjson.Check(body); err != nil {
		return nil, fmt.Errorf("RunAgentInput refused: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var in RunAgentInput
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("RunAgentInput is not valid JSON of the expected shape: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("RunAgentInput: trailing data after the JSON object")
	}
	switch {
	case in.ThreadID == "":
		return nil, fmt.Errorf("RunAgentInput.threadId is required")
	case !wire.ValidName(in.ThreadID):
		return nil, errors.New("RunAgentInput.threadId names the relay session: " + wire.NameRule)
	case in.RunID == "" || len(in.RunID) > 256:
		return nil, fmt.Errorf("RunAgentInput.runId is required (at most 256 characters)")
	case len(in.Messages) > maxMessages:
		return nil, fmt.Errorf("RunAgentInput.messages: at most %d", maxMessages)
	case len(in.Tools) > maxTools:
		return nil, fmt.Errorf("RunAgentInput.tools: at most %d", maxTools)
	}
	if s := bytes.TrimSpace(in.State); len(s) > 0 && string(s) != "null" && s[0] != '{' {
		return nil, fmt.Errorf("RunAgentInput.state must be an object")
	}
	for i, m := range in.Messages {
		switch m.Role {
		case "user", "assistant", "system", "developer", "tool", "activity", "reasoning":
		default:
			return nil, fmt.Errorf("RunAgentInput.messages[%d].role %q is not an AG-UI role", i, wire.Clip(m.Role, 32))
		}
		if m.Role == "tool" && m.callID() == "" {
			return nil, fmt.Errorf("RunAgentInput.messages[%d]: a tool message needs toolCallId (or tool_id)", i)
		}
		// A result that is JSON text goes to the agent as JSON
		// (deliverResults): it is held to the same rules as the body.
		if c := []byte(m.text()); m.Role == "tool" && json.Valid(c) {
			if err := strictjson.Check(c); err != nil {
				return nil, fmt.Errorf("RunAgentInput.messages[%d].content refused: %w", i, err)
			}
		}
	}
	for i, t := range in.Tools {
		if strings.TrimSpace(t.Name) == "" {
			return nil, fmt.Errorf("RunAgentInput.tools[%d].name is required", i)
		}
		if p := bytes.TrimSpace(t.Parameters); len(p) > 0 && string(p) != "null" && p[0] != '{' {
			return nil, fmt.Errorf("RunAgentInput.tools[%d].parameters must be a JSON schema object", i)
		}
	}
	return &in, nil
}

func (m Message) callID() string {
	if m.ToolCallID != "" {
		return m.ToolCallID
	}
	return m.ToolID
}

// text is the content as a string: AG-UI content is a string, or an
// array of parts whose text parts are joined.
func (m Message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(m.Content)
}
