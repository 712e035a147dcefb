package main

import (
	"bytes"
	"context"
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

// TestDocFlagsExist: every flag the documentation gives agentassistant-mcp
// is one it takes (a reader who pastes a client's command or its JSON args
// gets the bridge, not "flag provided but not defined").
func TestDocFlagsExist(t *testing.T) {
	var out, errs bytes.Buffer
	_ = run(context.Background(), []string{"-h"}, strings.NewReader(""), &out, &errs)
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`).FindAllStringSubmatch(out.String()+errs.String(), -1) {
		known[m[1]] = true
	}
	if len(known) == 0 {
		t.Fatal("agentassistant-mcp -h lists no flags")
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	// A command line or code span running it, or a JSON config's "args".
	cmd := regexp.MustCompile(`agentassistant-mcp"?((?:[ \t]+[^\s` + "`" + `#|;&)]+)*)`)
	args := regexp.MustCompile(`"args":\s*\[([^\]]*)\]`)
	flag := regexp.MustCompile(`^"?(-[a-z][a-z0-9-]*)"?,?$`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, m := range cmd.FindAllStringSubmatch(string(b), -1) {
			lines = append(lines, m[1])
		}
		for _, m := range args.FindAllStringSubmatch(string(b), -1) {
			lines = append(lines, strings.ReplaceAll(m[1], ",", " "))
		}
		for _, line := range lines {
			for _, w := range strings.Fields(line) {
				m := flag.FindStringSubmatch(w)
				if m == nil {
					continue
				}
				n++
				if !known[m[1]] {
					t.Errorf("%s: agentassistant-mcp%s: no such flag %s", filepath.Base(f), line, m[1])
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d flags of agentassistant-mcp in the documentation", n)
	}
}
