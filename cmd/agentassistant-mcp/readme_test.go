package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMENamesTheRealSettings: the example agentassistant-mcp.toml in
// README.md, and the one in the repository, show every key the MCP
// server reads and no other.
func TestREADMENamesTheRealSettings(t *testing.T) {
	var real []string
	ft := reflect.TypeOf(fileConfig{})
	for i := range ft.NumField() {
		if k, _, _ := strings.Cut(ft.Field(i).Tag.Get("toml"), ","); k != "" && k != "-" {
			real = append(real, k)
		}
	}
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	const intro = "\n`agentassistant-mcp.toml` (an example is in this repository):\n"
	_, rest, ok := strings.Cut(string(b), intro)
	if !ok {
		t.Fatalf("README.md has no line %q", intro)
	}
	_, rest, ok = strings.Cut(rest, "```toml\n")
	if !ok {
		t.Fatal("README.md has no TOML block for agentassistant-mcp.toml")
	}
	readmeBlock, _, _ := strings.Cut(rest, "```")
	example, err := os.ReadFile("../../" + configName)
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`(?m)^#?\s*([a-z0-9_]+)\s*=`)
	for name, block := range map[string]string{"README's agentassistant-mcp.toml": readmeBlock, configName: string(example)} {
		var shown []string
		for _, m := range key.FindAllStringSubmatch(block, -1) {
			shown = append(shown, m[1])
		}
		for _, k := range shown {
			if !slices.Contains(real, k) {
				t.Errorf("%s sets %s, which is no setting of agentassistant-mcp", name, k)
			}
		}
		for _, k := range real {
			if !slices.Contains(shown, k) {
				t.Errorf("%s does not show %s", name, k)
			}
		}
	}
}

// TestJSONSnippetsParse: every JSON block of the documentation (the MCP
// clients' configurations above all, which readers paste as they are) is
// JSON: one value, or one value a line (a protocol's messages).
func TestJSONSnippetsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllStringSubmatch(string(b), -1) {
			n++
			if json.Valid([]byte(m[1])) {
				continue
			}
			for line := range strings.Lines(m[1]) {
				if strings.TrimSpace(line) != "" && !json.Valid([]byte(line)) {
					t.Errorf("%s: a JSON block is no JSON, at %q", filepath.Base(f), strings.TrimSpace(line))
					break
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no JSON block found")
	}
}
