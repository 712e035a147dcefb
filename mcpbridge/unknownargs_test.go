package mcpbridge_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// callTool calls a tool whose call should end at once; a call that
// waits for a person instead is a failure, ended by the guard.
func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// An agent that writes "choices" for "options" asked a question with no
// options and was never told; so with every misspelt or invented
// argument. Each of our tools refuses an argument it does not know as a
// tool error naming it, the closest argument it has and all it has, and
// nothing reaches the person.
func TestUnknownArgumentsAreRefusedByName(t *testing.T) {
	c, _ := bridgeOverServer(t, "th")
	opts := []any{map[string]any{"label": "A"}, map[string]any{"label": "B"}}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"ask_question", map[string]any{"question": "q", "choices": opts},
			[]string{`unknown argument "choices"`, `did you mean "options"?`, "question, ", "multi_select", "allow_other", "reasoning_model_name"}},
		{"ask_question", map[string]any{"question": "q", "options": opts, "multiSelect": true}, []string{`"multiSelect"`, `did you mean "multi_select"?`}},
		{"ask_question", map[string]any{"questions": []any{map[string]any{"question": "q"}}}, []string{`"questions"`, `did you mean "question"?`}},
		{"ask_question", map[string]any{"question": "q", "model_name": "gpt-5"}, []string{`"model_name"`, `did you mean "reasoning_model_name"?`}},
		{"ask_question", map[string]any{"question": "q", "summary": "s"}, []string{`unknown argument "summary"`, "The arguments of ask_question"}},
		{"task_finish", map[string]any{"sumary": "s"}, []string{`"sumary"`, `did you mean "summary"?`}}, //nolint:misspell // the typo is the test
		{"work_report", map[string]any{"summary": "s", "xyzzy": 1, "plugh": 2},
			[]string{`unknown arguments "plugh", "xyzzy"`, "The arguments of work_report: summary, "}},
		{"wait_user_message", map[string]any{"timout": 5}, []string{`"timout"`, `did you mean "timeout"?`}},
		{"call_ui_tool", map[string]any{"tool_name": "next", "reason": "r", "parameters": map[string]any{}}, []string{`"parameters"`, `did you mean "params"?`}},
		{"send_agent_message", map[string]any{"message": "hi"}, []string{`"message"`, `did you mean "text"?`}},
		{"end_session", map[string]any{"why": "done"}, []string{`unknown argument "why"`, "The arguments of end_session: reason."}},
		{"get_ui_state", map[string]any{"refresh": true}, []string{`unknown argument "refresh"`, "get_ui_state takes no arguments"}},
	} {
		r := callTool(t, c, tc.tool, tc.args)
		for _, w := range tc.want {
			if !r.IsError || !strings.Contains(mcpbridge.Text(r), w) {
				t.Errorf("%s %v: error %v %q, want it to say %s", tc.tool, tc.args, r.IsError, mcpbridge.Text(r), w)
			}
		}
	}
}

// Every argument a tool publishes in its inputSchema is taken: the
// refusal knows the arguments from the schema the client was given, and
// those of the existing agentassistant's tools (project_directory,
// question, summary, timeout, agent_name, reasoning_model_name) are all
// there. A progress token travels in the call's _meta, beside the
// arguments, and is no argument.
func TestPublishedArgumentsAreTaken(t *testing.T) {
	c, _ := bridgeOverServer(t, "th")
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]map[string]any{}
	for _, tool := range tools.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		props[tool.Name] = s.Properties
	}
	for _, name := range []string{"ask_question", "task_finish", "work_report"} {
		for _, a := range []string{"project_directory", "timeout", "agent_name", "reasoning_model_name", "options", "multi_select", "allow_other"} {
			if _, ok := props[name][a]; !ok {
				t.Errorf("%s does not publish %q", name, a)
			}
		}
	}
	for tool, p := range props {
		args := map[string]any{}
		for a := range p {
			args[a] = nil // as if absent: the call ends at once, refused for a missing text or not at all
		}
		if tool == "wait_user_message" {
			args["timeout"] = "soon" // refused for its value: by its name, it is known
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		req.Params.Meta = &mcp.Meta{ProgressToken: "p1"}
		r, err := c.CallTool(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if strings.Contains(mcpbridge.Text(r), "unknown argument") {
			t.Errorf("%s refused its own published arguments: %s", tool, mcpbridge.Text(r))
		}
	}
	// The asking tools with every argument they publish, given a value:
	// refused for the (empty) text only, never for an argument's name.
	for tool, text := range map[string]string{"ask_question": "question", "task_finish": "summary", "work_report": "summary"} {
		r := callTool(t, c, tool, map[string]any{
			text: " ", "project_directory": "/p", "timeout": 60, "agent_name": "a",
			"reasoning_model_name": "m", "options": []any{}, "multi_select": false, "allow_other": true,
		})
		if !r.IsError || strings.Contains(mcpbridge.Text(r), "unknown argument") || !strings.Contains(mcpbridge.Text(r), "non-empty") {
			t.Errorf("%s: %q", tool, mcpbridge.Text(r))
		}
	}
}
