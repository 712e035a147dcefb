package repo

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// noRelay is a Backend of a server without relay sessions: the bridge
// lists its own tools only, the web UI's always-there tools included.
type noRelay struct{ mcpbridge.Backend }

func (noRelay) GetUIState(context.Context, *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no relay sessions"))
}

// TestReadmeNamesEveryTool: the README's section on the tools names
// each tool the bridge lists, so an agent's user learns of a tool added
// to mcpbridge (CONTRIBUTING.md, Adding an MCP tool) from the README,
// and none the bridge no longer has.
func TestReadmeNamesEveryTool(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "### The tools")
	if i < 0 {
		t.Fatal("README.md has no section The tools")
	}
	sec := readme[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	s := mcpbridge.New(mcpbridge.Options{Backend: noRelay{}})
	var names []string
	for name := range s.ListTools() {
		names = append(names, name)
		if !strings.Contains(sec, "`"+name+"`") {
			t.Errorf("the bridge lists the tool %s; README.md's section The tools does not name it", name)
		}
	}
	if len(names) < 3 {
		t.Fatalf("the bridge lists %v: the search is wrong", names)
	}
	slices.Sort(names)
	t.Logf("tools: %v", names)
}
