package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// JSON-RPC 2.0's codes for a body that is no request.
const (
	parseError     = -32700
	invalidRequest = -32600
)

// checkBody reads a POST's body (already bounded by the server) and
// answers it as JSON-RPC 2.0 says when it is no request, notification or
// response; else it hands the body on for the MCP transport to read
// again. mcp-go decodes what it can into its own types and so takes an
// id that is an object or true, or params that are a string, as if they
// were right, and calls an empty batch unreadable. It reports whether the
// request goes on.
func checkBody(w http.ResponseWriter, r *http.Request) bool {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "cannot read the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if code, id, why := problem(b); code != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": why}})
		_, _ = w.Write(out)
		return false
	}
	return true
}

// problem says what makes b no JSON-RPC 2.0 message: its code, the id to
// answer with (null when it has none that can be read) and why; code 0
// when b is one.
func problem(b []byte) (code int, id json.RawMessage, why string) {
	null := json.RawMessage("null")
	if !json.Valid(b) {
		return parseError, null, "the body is not valid JSON"
	}
	t := bytes.TrimLeft(b, " \t\r\n")
	switch {
	case len(t) > 0 && t[0] == '[':
		return invalidRequest, null, "a batch (JSON array) is not taken: send one JSON-RPC message per request"
	case len(t) == 0 || t[0] != '{':
		return invalidRequest, null, "the body must be a JSON-RPC message: a JSON object"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return invalidRequest, null, "the body must be a JSON-RPC message: a JSON object"
	}
	// mcp-go matches member names without regard to case, as
	// encoding/json does: so are they checked here.
	field := map[string]json.RawMessage{}
	for k, v := range m {
		field[strings.ToLower(k)] = v
	}
	id, hasID := field["id"]
	switch {
	case !hasID:
		id = null
	case !isString(id) && !isNumber(id) && !bytes.Equal(bytes.TrimSpace(id), null):
		return invalidRequest, null, "id must be a string, a number or null"
	}
	if v := field["jsonrpc"]; !bytes.Equal(bytes.TrimSpace(v), []byte(`"2.0"`)) {
		return invalidRequest, id, `jsonrpc must be "2.0"`
	}
	method, hasMethod := field["method"]
	_, hasResult := field["result"]
	_, hasError := field["error"]
	switch {
	case hasMethod && !isString(method):
		return invalidRequest, id, "method must be a string"
	case !hasMethod && !hasResult && !hasError:
		return invalidRequest, id, "a request needs a method (a response, a result or an error)"
	}
	if p, ok := field["params"]; ok {
		if t := bytes.TrimSpace(p); len(t) == 0 || (t[0] != '{' && t[0] != '[') {
			return invalidRequest, id, fmt.Sprintf("params must be an object or an array, not %.40s", t)
		}
	}
	return 0, nil, ""
}

func isString(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '"'
}

func isNumber(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && (t[0] == '-' || t[0] >= '0' && t[0] <= '9')
}
