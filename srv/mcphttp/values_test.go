package mcphttp

import (
	"runtime"
	"strings"
	"testing"
)

// TestBodyOfMillionsOfValuesRefused: a tool call of 16 MiB, under the
// body bound, whose arguments hold an array of eight million zeros. Read
// token by token, and then decoded by the MCP library into its maps,
// each zero of two bytes costs some hundred; the body is refused as an
// invalid request once it is past the values any message holds, for a
// small part of what reading it whole costs.
func TestBodyOfMillionsOfValuesRefused(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":` +
		`{"question":"q","extra":[0` + strings.Repeat(`,0`, 8<<20) + `]}}}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, id, why, _ := problem(body)
	runtime.ReadMemStats(&after)
	allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
	t.Logf("a body of %d KiB: %d MiB allocated to judge it; %d %s %s", len(body)>>10, allocated, code, id, why)
	if code != invalidRequest || string(id) != "7" || !strings.Contains(why, "values") {
		t.Errorf("problem = %d %s %q, want an invalid request of id 7 naming the bound", code, id, why)
	}
	if allocated > 64 {
		t.Errorf("%d MiB allocated to judge a body of %d KiB", allocated, len(body)>>10)
	}
}
