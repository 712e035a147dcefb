package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentassistant/agentassistant/internal/strictjson"
)

// JSON-RPC 2.0's codes for a body that is no request, and the server's fault.
const (
	parseError     = -32700
	invalidRequest = -32600
	internalError  = -32603
)

// checkBody reads a POST's body (already bounded by the server) and
// answers it as JSON-RPC 2.0 says when it is no request, notification or
// response; else it hands the body on for the MCP transport to read
// again, and gives its method ("" for a response), id (null when it
// has none) and the body itself. mcp-go decodes what it can into its own types and so takes
// an id that is an object or true, or params that are a string, as if
// they were right, and calls an empty batch unreadable. ok reports
// whether the request goes on.
func checkBody(w http.ResponseWriter, r *http.Request) (method string, id json.RawMessage, body []byte, ok bool) {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		refuse(w, http.StatusRequestEntityTooLarge, invalidRequest, nil, fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
		return "", nil, nil, false
	case err != nil:
		// Cut off at the body deadline, or broken off: the socket's own
		// error names only the server's address.
		refuse(w, http.StatusRequestTimeout, invalidRequest, nil, "the body did not arrive whole in time; send it again")
		return "", nil, nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	code, id, why, method := problem(b)
	if code != 0 {
		refuse(w, http.StatusBadRequest, code, id, why)
		return "", nil, nil, false
	}
	return method, id, b, true
}

// refuse answers with rpcError, with the HTTP status status.
func refuse(w http.ResponseWriter, status, code int, id json.RawMessage, why string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rpcError(id, code, why))
}

// rpcError is a JSON-RPC error: its code, the id (null when nil) and why.
func rpcError(id json.RawMessage, code int, why string) []byte {
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": why}})
	return out
}

// problem says what makes b no JSON-RPC 2.0 message: its code, the id to
// answer with (null when it has none that can be read) and why; code 0
// when b is one, with its id (null for a notification) and method.
//
// b is read once, by the strict checker's tokenizer, which also gives the
// top-level members as written (strictjson.Members); what follows reads
// only those few values. The MCP library decodes the body again, into
// its own types: that decoding is its own, and it is the only other one.
func problem(b []byte) (code int, id json.RawMessage, why, method string) {
	null := json.RawMessage("null")
	ms, err := strictjson.Members(b)
	// mcp-go matches member names without regard to case, as
	// encoding/json does (the last one wins): a name given twice, in any
	// case, is refused rather than guessed at.
	field, dup := members(ms)
	var bad *strictjson.Error
	if errors.As(err, &bad) && (bad.Kind == strictjson.Syntax || bad.Kind == strictjson.Depth && dup == "") {
		return parseError, null, "the body is not valid JSON: " + bad.Error(), ""
	}
	t := bytes.TrimLeft(b, " \t\r\n")
	switch {
	case len(t) > 0 && t[0] == '[':
		return invalidRequest, null, "a batch (JSON array) is not taken: send one JSON-RPC message per request", ""
	case len(t) == 0 || t[0] != '{':
		return invalidRequest, null, "the body must be a JSON-RPC message: a JSON object", ""
	}
	if dup != "" {
		id := null
		if v, ok := field["id"]; ok && dup != "id" && validID(v) {
			id = v
		}
		return invalidRequest, id, fmt.Sprintf("member %q is given more than once", dup), ""
	}
	// Below the top the same holds, with names as written (a tool's
	// arguments may have "a" and "A"); and a number mcp-go would read as
	// Inf is no request either.
	if bad != nil {
		id := null
		if v, ok := field["id"]; ok && validID(v) {
			id = v
		}
		return invalidRequest, id, bad.Error(), ""
	}
	methodV, hasMethod := field["method"]
	_, hasResult := field["result"]
	_, hasError := field["error"]
	id, hasID := field["id"]
	isNull := bytes.Equal(id, null)
	switch {
	case !hasID:
		id = null
	case isNull && !hasMethod: // a response to what could not be read
	case isNull:
		return invalidRequest, null, "id must not be null in MCP: a string or an integer, or none for a notification", ""
	case !validID(id):
		return invalidRequest, null, "id must be a string or an integer (within ±2^53, so it comes back unchanged)", ""
	}
	var version string
	if v, ok := field["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != "2.0" {
		return invalidRequest, id, `jsonrpc must be "2.0"`, ""
	}
	switch {
	case hasMethod && !isString(methodV):
		return invalidRequest, id, "method must be a string", ""
	case hasMethod && (hasResult || hasError):
		return invalidRequest, id, "a message is a request (method) or a response (result or error), not both", ""
	case !hasMethod && !hasResult && !hasError:
		return invalidRequest, id, "a request needs a method (a response, a result or an error)", ""
	}
	if p, ok := field["params"]; ok && !bytes.Equal(p, null) {
		if len(p) == 0 || (p[0] != '{' && p[0] != '[') {
			return invalidRequest, id, fmt.Sprintf("params must be an object or an array, not %.40s", p), ""
		}
	}
	if hasMethod {
		_ = json.Unmarshal(methodV, &method) // a string, checked above
	}
	return 0, id, "", method
}

// members are the top-level members ms by their names in lower case; dup
// is the first name given twice.
func members(ms []strictjson.Member) (field map[string]json.RawMessage, dup string) {
	field = make(map[string]json.RawMessage, len(ms))
	for _, m := range ms {
		k := strings.ToLower(m.Name)
		if _, seen := field[k]; seen && dup == "" {
			dup = k
		}
		field[k] = m.Value
	}
	return field, dup
}

func isString(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '"'
}

// validID: a string, or an integer a float64 holds exactly (mcp-go reads
// numbers so, and a larger one would come back changed).
func validID(v json.RawMessage) bool {
	if isString(v) {
		return true
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
	return err == nil && n >= -(1<<53) && n <= 1<<53
}
