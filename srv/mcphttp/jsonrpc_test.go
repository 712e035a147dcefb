package mcphttp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/internal/strictjson"
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
		{`{"jsonrpc":"2.0","id":1,"ID":{"a":1},"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`, -32600, "1"},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":5,"method":"ping","result":{}}`, -32600, "5"},
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, -32700, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}`, -32700, "null"},
		{`{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping","params":{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}`, -32600, "null"},
		// A name given twice below the top: the tool would get the last.
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask_question","name":"work_report"}}`, -32600, "9"},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x","arguments":{"a":[{"b":1,"\u0062":2}]}}}`, -32600, "10"},
		{`{"jsonrpc":"2.0","id":11,"method":"ping","m\u0065thod":"tools/list"}`, -32600, "11"},
		{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"x","arguments":{"n":1e999999}}}`, -32600, "12"},
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
	// params: null is as if there were none; "2.0" may be written with
	// escapes.
	for _, body := range []string{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":null}`, `{"jsonrpc":"2\u002e0","id":4,"method":"tools/list"}`} {
		listed(t, base, c.GetSessionId(), body)
	}
}

// listed posts body in the session sid and expects the tools back.
func listed(t *testing.T, base, sid, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tools"`) {
		t.Errorf("%s: %d %.200s, want the tools", body, resp.StatusCode, b)
	}
}

// A body over the server's bound is 413, answered in JSON-RPC's shape.
func TestBodyTooLarge(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(strings.Repeat(" ", 100)+"{}"))
	r.Body = http.MaxBytesReader(rec, r.Body, 64)
	if _, _, _, ok := checkBody(rec, r); ok {
		t.Fatal("a body over the bound went on")
	}
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":-32600`) {
		t.Errorf("%d %s, want 413 with a JSON-RPC error", rec.Code, rec.Body.String())
	}
}

// A body that opens no session is refused before a session is made room
// for: at the cap, the idle session that would have made way stays.
func TestRefusedBodyEvictsNoSession(t *testing.T) {
	_, base := newEndpoint(t, 1)
	c := dial(t, base, "token-a", "")
	req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", strings.NewReader(`garbage`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("garbage: %d, want 400", resp.StatusCode)
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the idle session after a refused body: %v", err)
	}
}

// TestBodyCheckedInOnePass: checkBody judges a body in one pass of the
// strict checker's tokenizer, which also gives it the top-level members:
// it costs what strictjson.Check alone costs, not a validation, a
// decoding of the members and the strict check, one after the other.
func TestBodyCheckedInOnePass(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_ui_tool","arguments":` +
		`{"tool_name":"postMessage","reason":"r","params":{"text":"` + strings.Repeat("x", 1<<20) + `"}}}}`)
	alone := allocated(func() {
		if err := strictjson.Check(body); err != nil {
			t.Fatal(err)
		}
	})
	checked := allocated(func() {
		if code, _, why, _ := problem(body); code != 0 {
			t.Fatal(why)
		}
	})
	if checked > alone*5/4 {
		t.Errorf("checking the body allocates %d bytes, the strict pass alone %d", checked, alone)
	}
}

// allocated is what f allocates on the heap, in bytes, per run.
func allocated(f func()) uint64 {
	const runs = 8
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}
