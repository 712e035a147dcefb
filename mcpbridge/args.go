package mcpbridge

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// An agent's arguments are read as meant or refused as written: a value
// of the wrong kind ("2m" for seconds, "yes" for a flag) would otherwise
// read as the default, and the agent would wait ten minutes believing it
// asked for two, or offer one choice where it meant several. The error
// names the argument, what it got and how to write it, so the agent can
// correct its next call.

// secondsArg reads a number of seconds (also as a numeric string, as
// models often send it); 0 when absent.
func secondsArg(req mcp.CallToolRequest, name, hint string) (float64, error) {
	v, ok := req.GetArguments()[name]
	if !ok || v == nil {
		return 0, nil
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%q is a number of seconds %s; got %s", name, hint, shown(v))
}

// boolArg reads a flag (also "true" or "false" in a string); def when
// absent.
func boolArg(req mcp.CallToolRequest, name string, def bool) (bool, error) {
	v, ok := req.GetArguments()[name]
	if !ok || v == nil {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%q is true or false; got %s", name, shown(v))
}

// textArg reads a string argument; "" when absent.
func textArg(req mcp.CallToolRequest, name string) (string, error) {
	v, ok := req.GetArguments()[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%q must be a string; got %s", name, shown(v))
	}
	return s, nil
}

// shown is a value as the agent wrote it, cut short.
func shown(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case []any:
		s = "an array"
	case map[string]any:
		s = "an object"
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
