package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// In a cluster each instance's MCP server numbers the requests it sends
// a session's client (a form: elicitation/create) on its own, from 1, so
// a client whose calls run through two instances, or whose call's stream
// was resumed through another, may hold two forms numbered alike; its
// answer to one would reach the other, or be refused. So on the wire a
// request to the client takes the ID "<tag>:<n>": its number n within
// the session's log on the instance that sent it (tag, eventLog.tag),
// unique to that session and instance, and the withdrawal of a form
// (notifications/cancelled) names it so. An answer that names such an
// ID is handed, as n, to the MCP server of the instance whose log it
// names: at once when that is this one, else relayed to it alone
// (relay.go). One instance alone, without a shared key, sends what its
// MCP server writes, byte for byte.

// formIDSep parts the tag of a form's ID from its number.
const formIDSep = ":"

// wireFormID is the ID the client sees of request n of the session's
// MCP server here.
func (l *eventLog) wireFormID(n int64) json.RawMessage {
	b, _ := json.Marshal(l.tag + formIDSep + strconv.FormatInt(n, 10))
	return b
}

// parseFormID reads an ID the client answers with: the tag of the log
// and the number of the MCP server's request, ok when it is one of the
// IDs wireFormID gives.
func parseFormID(id json.RawMessage) (tag string, n int64, ok bool) {
	var s string
	if len(id) == 0 || id[0] != '"' || json.Unmarshal(id, &s) != nil {
		return "", 0, false
	}
	tag, num, found := strings.Cut(s, formIDSep)
	if !found || !validTag(tag) {
		return "", 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != num {
		return "", 0, false
	}
	return tag, n, true
}

// validTag reports whether tag may be a log's (newEventLog): ten of
// base32's lower-case letters and digits.
func validTag(tag string) bool {
	if len(tag) != 10 {
		return false
	}
	for _, c := range tag {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// toClient is data, a message of the MCP server's to the client, as it
// goes on the wire: a request's ID, or the ID a notifications/cancelled
// withdraws, numbered as wireFormID says in a cluster. Anything else,
// and everything of one instance alone, is data itself.
func (l *eventLog) toClient(data []byte) []byte {
	out, _ := l.numbered(data)
	return out
}

// numbered is toClient, and the method of the request it numbered, ""
// when data is none.
func (l *eventLog) numbered(data []byte) (out []byte, request string) {
	if !l.cluster || !bytes.Contains(data, []byte(`"method"`)) {
		return data, ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data, ""
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil {
		return data, ""
	}
	if n, ok := number(m["id"]); ok {
		m["id"] = l.wireFormID(n)
		request = method
	} else if method == "notifications/cancelled" {
		var params map[string]json.RawMessage
		if json.Unmarshal(m["params"], &params) != nil {
			return data, ""
		}
		n, ok := number(params["requestId"])
		if !ok {
			return data, ""
		}
		params["requestId"] = l.wireFormID(n)
		if m["params"], ok = marshal(params); !ok {
			return data, ""
		}
	} else {
		return data, ""
	}
	out, ok := marshal(m)
	if !ok {
		return data, ""
	}
	return out, request
}

// number reads a JSON integer.
func number(v json.RawMessage) (int64, bool) {
	if len(v) == 0 || v[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

func marshal(v any) (json.RawMessage, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

// withID is body, a JSON-RPC message, with id in place of its own.
func withID(body []byte, id int64) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil, false
	}
	m["id"] = json.RawMessage(strconv.FormatInt(id, 10))
	return marshal(m)
}

// formWriter is the response writer of a session's standalone stream
// (GET) in a cluster: what mcp-go writes there, one SSE event a Write
// (a withdrawal may go there), is numbered as toClient says.
type formWriter struct {
	http.ResponseWriter
	log func() *eventLog
}

func (f formWriter) Write(p []byte) (int, error) {
	const head, tail = "event: message\ndata: ", "\n\n"
	data, ok := bytes.CutPrefix(p, []byte(head))
	if ok {
		data, ok = bytes.CutSuffix(data, []byte(tail))
	}
	if !ok || bytes.IndexByte(data, '\n') >= 0 {
		return f.ResponseWriter.Write(p)
	}
	out := f.log().toClient(data)
	if bytes.Equal(out, data) {
		return f.ResponseWriter.Write(p)
	}
	if _, err := f.ResponseWriter.Write([]byte(head + string(out) + tail)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (f formWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (f formWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }
