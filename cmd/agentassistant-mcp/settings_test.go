package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImpossibleSettings: agentassistant-mcp refuses a setting that cannot
// work before it serves MCP, naming the key, its flag and the value.
func TestImpossibleSettings(t *testing.T) {
	for _, c := range []struct {
		body string
		args []string
		want string
	}{
		{"agentassistant_server_port = 0\n", nil, "agentassistant_server_port (-port) = 0"},
		{"", []string{"-port", "70000"}, "agentassistant_server_port (-port) = 70000"},
		{"agentassistant_server_host = \"http://srv\"\n", nil, `agentassistant_server_host (-host) = "http://srv"`},
		{"host_grace_seconds = -1\n", nil, "host_grace_seconds = -1"},
		{"log_level = \"loud\"\n", nil, `log_level (-log-level) = "loud"`},
	} {
		t.Run(c.want, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "mcp.toml")
			if err := os.WriteFile(file, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			err := run(context.Background(), append([]string{"-config", file, "-token", "mcp-token-0123456789"}, c.args...), strings.NewReader(""), &out, &errs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if out.Len() != 0 {
				t.Fatalf("wrote to stdout: %q", out.String())
			}
		})
	}
	// 0 is the documented default of host_grace_seconds.
	file := filepath.Join(t.TempDir(), "mcp.toml")
	if err := os.WriteFile(file, []byte("host_grace_seconds = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-config", file, "-token", "mcp-token-0123456789"}, strings.NewReader(""), &out, &errs); err != nil {
		t.Fatalf("host_grace_seconds = 0: %v", err)
	}
}
