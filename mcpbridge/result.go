package mcpbridge

import (
	"bytes"
	"encoding/json"
)

// maxHostResult bounds the host's own result shown to the agent.
const maxHostResult = 16 << 10

// hostResult is the "result" a host put in its tool.result (an AG-UI
// frontend's tool output is there), as a line for the agent; "" when
// there is none.
func hostResult(resultJSON string) string {
	var p struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal([]byte(resultJSON), &p) != nil {
		return ""
	}
	r := bytes.TrimSpace(p.Result)
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	if len(r) > maxHostResult {
		r = append(r[:maxHostResult:maxHostResult], []byte("…")...)
	}
	return "\nresult: " + string(r)
}
