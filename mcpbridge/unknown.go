package mcpbridge

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentassistant/agentassistant/internal/config"
)

// An argument a tool does not know is refused, not ignored: an agent that
// writes "choices" for "options" would otherwise ask a question with no
// options and never learn why. The known arguments are the ones the tool
// publishes in its inputSchema, so what a client was told it may send is
// exactly what is taken. The call's _meta (its progress token) travels in
// the request's params, beside the arguments, and is not one of them.

// addStrict registers tool with a handler that first refuses arguments
// its inputSchema does not name.
func addStrict(s *server.MCPServer, tool mcp.Tool, h server.ToolHandlerFunc) {
	s.AddTool(tool, strict(tool, h))
}

func strict(tool mcp.Tool, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	known := argNames(tool)
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := unknownArgs(tool.Name, known, req.GetArguments()); err != nil {
			return badArgs(tool.Name, err)
		}
		return h(ctx, req)
	}
}

// argNames are the arguments tool publishes, the required ones first.
func argNames(tool mcp.Tool) []string {
	names := make([]string, 0, len(tool.InputSchema.Properties))
	for k := range tool.InputSchema.Properties {
		names = append(names, k)
	}
	req := tool.InputSchema.Required
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(-cmp.Compare(boolInt(slices.Contains(req, a)), boolInt(slices.Contains(req, b))), strings.Compare(a, b))
	})
	return names
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unknownArgs names the arguments of args that are not among known, with
// the closest known one when there is one, and all the known ones.
func unknownArgs(tool string, known []string, args map[string]any) error {
	var unknown []string
	for k := range args {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if len(unknown) > 5 { // bounded: a call with a thousand keys gets a short answer
		unknown = append(unknown[:5], "…")
	}
	q := make([]string, 0, len(unknown))
	for _, u := range unknown {
		if u == "…" {
			q = append(q, u)
			continue
		}
		q = append(q, strconv.Quote(clip(u)))
	}
	var b strings.Builder
	if len(q) == 1 {
		fmt.Fprintf(&b, "unknown argument %s", q[0])
	} else {
		fmt.Fprintf(&b, "unknown arguments %s", strings.Join(q, ", "))
	}
	var hints []string
	for _, u := range unknown {
		if m := closestArg(u, known); m != "" && !slices.Contains(hints, m) {
			hints = append(hints, strconv.Quote(m))
		}
	}
	if len(hints) > 0 {
		fmt.Fprintf(&b, ": did you mean %s?", strings.Join(hints, " and "))
	} else {
		b.WriteByte('.')
	}
	if len(known) == 0 {
		fmt.Fprintf(&b, " %s takes no arguments", tool)
	} else {
		fmt.Fprintf(&b, " The arguments of %s: %s", tool, strings.Join(known, ", "))
	}
	return fmt.Errorf("%s", b.String())
}

// clip cuts a name an agent made up to a length fit for an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// synonyms are the words agents use for our arguments that no spelling
// distance finds.
var synonyms = map[string][]string{
	"options":              {"choices", "choice", "answers", "buttons", "alternatives", "selections"},
	"multi_select":         {"multiple", "multi", "multiselect", "multiple_choice", "allow_multiple"},
	"allow_other":          {"custom", "allow_custom", "free_text", "allow_free_text", "other", "allow_text"},
	"reasoning_model_name": {"model", "model_name", "llm", "reasoning_model"},
	"agent_name":           {"agent", "client_name", "client"},
	"project_directory":    {"cwd", "project", "project_dir", "directory", "dir", "workspace", "workdir", "project_path", "path"},
	"question":             {"prompt", "message", "text", "ask", "query"},
	"summary":              {"report", "result", "message", "text", "work_report"},
	"timeout":              {"timeout_seconds", "wait", "seconds", "timeout_secs"},
	"params":               {"parameters", "args", "arguments", "input"},
	"tool_name":            {"tool", "name", "action"},
	"text":                 {"message", "content", "msg"},
}

// closestArg is the known argument u most likely means, or "".
func closestArg(u string, known []string) string {
	n := snake(u)
	if slices.Contains(known, n) {
		return n
	}
	for _, k := range known {
		if slices.Contains(synonyms[k], n) {
			return k
		}
	}
	return config.Closest(n, known...)
}

// snake writes multiSelect, allow-other or Timeout as our arguments are
// written.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '-' || r == ' ':
			b.WriteByte('_')
		case unicode.IsUpper(r):
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
