package mcpbridge

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// The choices a tool call may offer the person: options shown as buttons,
// one or several to choose, and free text besides unless allow_other is
// false.

func choiceOpts() []mcp.ToolOption {
	return []mcp.ToolOption{
		mcp.WithArray("options",
			mcp.Description(fmt.Sprintf("Choices the person can answer with in one tap (e.g. \"Continue\", \"Stop\"). At most %d; "+
				"labels 1 to %d bytes and unique, descriptions at most %d bytes. The answer names the chosen label(s). "+
				"Do not add an \"Other\" option: allow_other lets the person type their own answer.",
				wire.MaxOptions, wire.MaxLabelBytes, wire.MaxDescriptionBytes)),
			mcp.MaxItems(wire.MaxOptions),
			mcp.Items(map[string]any{
				"type": "object",
				"properties": map[string]any{
					"label":       map[string]any{"type": "string", "description": "What the person taps; short."},
					"description": map[string]any{"type": "string", "description": "What choosing it means; optional."},
				},
				"required": []string{"label"},
			}),
		),
		mcp.WithBoolean("multi_select", mcp.DefaultBool(false),
			mcp.Description("The person may choose several options (default false: one).")),
		mcp.WithBoolean("allow_other", mcp.DefaultBool(true),
			mcp.Description("The person may type free text besides or instead of the options (default true).")),
	}
}

// answerSchema is the tools' outputSchema: the shape of answer.
var answerSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "answered": {"type": "boolean", "description": "The person answered this call; false when earlier answers were handed over instead of asking."},
    "chosen": {"type": "array", "items": {"type": "string"}, "description": "The labels of the options the person chose, in the order offered; empty when none."},
    "text": {"type": "string", "description": "What the person typed besides the options."},
    "images": {"type": "integer", "description": "How many images the answer carries (they are in the content)."}
  },
  "required": ["answered", "chosen", "text", "images"]
}`)

// answer is a result's structured content (answerSchema).
type answer struct {
	Answered bool     `json:"answered"`
	Chosen   []string `json:"chosen"`
	Text     string   `json:"text"`
	Images   int      `json:"images"`
}

// questionsArg reads the choices of a call as the wire's Questions (one
// entry, for text); nil when the call offers none. The error names the
// limit broken, for the agent.
func questionsArg(req mcp.CallToolRequest, text string) ([]*pb.Question, error) {
	// The flags are read first: a mistyped one is refused even on a call
	// without options, rather than dropped while the question goes out.
	multiple, err := boolArg(req, "multi_select", false)
	if err != nil {
		return nil, err
	}
	custom, err := boolArg(req, "allow_other", true)
	if err != nil {
		return nil, err
	}
	args := req.GetArguments()
	raw, ok := args["options"]
	if !ok || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("\"options\" must be an array of objects, e.g. %s, not %s", optionsExample, kindOf(raw))
	}
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > wire.MaxOptions {
		return nil, fmt.Errorf("too many options: %d, at most %d", len(list), wire.MaxOptions)
	}
	opts := make([]*pb.Option, 0, len(list))
	for i, it := range list {
		switch v := it.(type) {
		case string:
			opts = append(opts, &pb.Option{Label: strings.TrimSpace(v)})
		case map[string]any:
			o, err := optionOf(i, v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, o)
		default:
			return nil, fmt.Errorf("option %d must be an object with a \"label\", e.g. %s", i+1, optionsExample)
		}
	}
	if err := wire.CheckOptions(opts); err != nil {
		return nil, err
	}
	return []*pb.Question{{Question: text, Options: opts, Multiple: multiple, Custom: custom}}, nil
}

const optionsExample = `[{"label": "Yes"}, {"label": "No"}]`

// optionOf reads option i (from 0) of a call; the error says what the
// agent wrote instead of a label.
func optionOf(i int, v map[string]any) (*pb.Option, error) {
	raw, ok := v["label"]
	if !ok {
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, strconv.Quote(k))
		}
		slices.Sort(keys)
		got := "nothing"
		if len(keys) > 0 {
			got = strings.Join(keys, ", ")
		}
		return nil, fmt.Errorf("option %d has no \"label\" (it has %s): each option is %s", i+1, got, `{"label": "Yes", "description": "…"}`)
	}
	l, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("option %d: \"label\" must be a string; got %s", i+1, shown(raw))
	}
	d, ok := v["description"].(string)
	if _, given := v["description"]; given && !ok && v["description"] != nil {
		return nil, fmt.Errorf("option %d: \"description\" must be a string; got %s", i+1, shown(v["description"]))
	}
	return &pb.Option{Label: strings.TrimSpace(l), Description: strings.TrimSpace(d)}, nil
}

// kindOf names a JSON value's kind for an error.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case float64, int:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// chosenText is the line telling the agent which options were chosen.
func chosenText(chosen []string) string {
	q := make([]string, len(chosen))
	for i, c := range chosen {
		q[i] = fmt.Sprintf("%q", c)
	}
	if len(chosen) == 1 {
		return "The person chose the option " + q[0] + "."
	}
	return "The person chose the options " + strings.Join(q, ", ") + "."
}
