package mcphttp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A body that is no JSON-RPC request is answered as JSON-RPC 2.0 says:
// -32700 for what is not JSON, -32600 for JSON that is no request (an
// empty batch, an id that is neither a string, a number nor null,
// params that are neither an object nor an array, a method that is no
// string), with the id when it can be read and null when not. The
// session goes on.
func TestNotARequest(t *testing.T) {
	_, base := newEndpoint(t, 0)
	c := dial(t, base, "token-a", "")
	for _, tc := range []struct {
		body string
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"`, -32700, "null"},
		{`[]`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":"x"}`, -32600, "7"},
		{`{"jsonrpc":"2.0","id":"s","method":12}`, -32600, `"s"`},
		{`{"jsonrpc":"1.0","id":8,"method":"tools/list"}`, -32600, "8"},
		{`"hello"`, -32600, "null"},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.GetSessionId())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Error.Code != tc.code || string(got.ID) != tc.id {
			t.Errorf("%s: %d %.200s, want error %d with id %s", tc.body, resp.StatusCode, b, tc.code, tc.id)
		}
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the session after the bad bodies: %v", err)
	}
}
