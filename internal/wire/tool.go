package wire

import "encoding/json"

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
