package wire

import (
	"encoding/json"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestKindNames(t *testing.T) {
	for k, want := range map[Kind]string{AskQuestion: "AskQuestion", TaskFinish: "TaskFinish", 7: "Kind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d) = %q, want %q", int(k), got, want)
		}
	}
}

func TestInt32FieldsSaturate(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int32
	}{{90 * time.Second, 90}, {1500 * time.Millisecond, 1}, {-time.Second, 0}, {math.MaxInt64, math.MaxInt32}} {
		if got := Seconds(c.d); got != c.want {
			t.Errorf("Seconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if Count(-3) != 0 || Count(math.MaxInt32+1) != math.MaxInt32 || Count(5) != 5 {
		t.Error("Count does not saturate")
	}
}

func TestNewIDs(t *testing.T) {
	a, b := NewID(), NewID()
	if len(a) != 24 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("ids %q %q", a, b)
	}
}

func TestParseTool(t *testing.T) {
	for _, c := range []struct {
		entry, name, desc, params string
	}{
		{`{"name":"select","description":"Pick","parameters":{"type":"object"}}`, "select", "Pick", `{"type":"object"}`},
		{`{"name":"select","inputSchema":{"type":"object"}}`, "select", "", `{"type":"object"}`},
		{`{"name":"a","parameters":{"p":1},"inputSchema":{"i":1}}`, "a", "", `{"p":1}`},
		{`{"type":"function","function":{"name":"next","description":"Go on","parameters":{"type":"object"}}}`, "next", "Go on", `{"type":"object"}`},
		{`{"name":"own","function":{"name":"other"}}`, "own", "", ""},
		{`{"name":"x","description":5}`, "x", "", ""}, // the fields that fit are kept
		{`{"function":null}`, "", "", ""},
		{`[1,2]`, "", "", ""},
		{`not json`, "", "", ""},
	} {
		got := ParseTool(json.RawMessage(c.entry))
		if got.Name != c.name || got.Description != c.desc || string(got.Parameters) != c.params {
			t.Errorf("ParseTool(%s) = %+v %s, want %q %q %s", c.entry, got, got.Parameters, c.name, c.desc, c.params)
		}
	}
}

// TestLeaf: both sides import this package, so it may import nothing of
// the module but the generated code.
func TestLeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agentassistant/agentassistant/"
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) && p != module+"internal/wire" && !strings.HasPrefix(p, module+"gen/") {
			t.Errorf("wire depends on %s", p)
		}
	}
}
