package mcpbridge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// An agent's arguments are read as meant or refused as written: a value
// of the wrong kind ("2m" for seconds, "yes" for a flag) would otherwise
// read as the default, and the agent would wait ten minutes believing it
// asked for two, or offer one choice where it meant several. The error
// names the argument, what it got and how to write it, so the agent can
// correct its next call.

// secondsArg reads a number of seconds (also as a numeric string, as
// models often send it); 0 when absent. "NaN" and "Inf" parse as
// floats but name no wait: refused.
func secondsArg(req mcp.CallToolRequest, name, hint string) (float64, error) {
	v, ok := req.GetArguments()[name]
	if !ok || v == nil {
		return 0, nil
	}
	switch x := v.(type) {
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return x, nil
		}
	case int:
		return float64(x), nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%q is a number of seconds %s; got %s", name, hint, shown(v))
}

// clampSeconds is sec seconds within lo and hi, bounded before it is
// made a Duration: 1e12 seconds overflows one, which would wrap to the
// shortest wait where the agent asked for the longest.
func clampSeconds(sec float64, lo, hi time.Duration) time.Duration {
	sec = min(max(sec, lo.Seconds()), hi.Seconds())
	return min(max(time.Duration(sec*float64(time.Second)), lo), hi)
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
