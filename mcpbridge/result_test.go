package mcpbridge

import (
	"strings"
	"testing"
)

func TestHostResult(t *testing.T) {
	for in, want := range map[string]string{
		`{"ok":true,"result":{"status":"ok"}}`: "\nresult: {\"status\":\"ok\"}",
		`{"ok":true,"result":"done"}`:          "\nresult: \"done\"",
		`{"ok":true,"toolName":"select"}`:      "",
		`{"ok":true,"result":null}`:            "",
		`not json`:                             "",
	} {
		if got := hostResult(in); got != want {
			t.Errorf("hostResult(%s) = %q, want %q", in, got, want)
		}
	}
	if got := hostResult(`{"result":"` + strings.Repeat("x", 20000) + `"}`); len(got) > maxHostResult+32 || !strings.HasSuffix(got, "…") {
		t.Errorf("long result not cut: %d bytes", len(got))
	}
}
