package mcpbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

func TestToolsOfferOptionsAndDeclareOutput(t *testing.T) {
	c := newClient(t, &fakeSrv{}, Options{})
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, tool := range tools.Tools {
		if tool.Name != "ask_question" && tool.Name != "task_finish" && tool.Name != "work_report" {
			continue
		}
		seen++
		b, _ := json.Marshal(tool)
		var m struct {
			InputSchema struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"inputSchema"`
			OutputSchema struct {
				Properties map[string]any `json:"properties"`
			} `json:"outputSchema"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		p := m.InputSchema.Properties
		if p["options"]["type"] != "array" || p["multi_select"]["default"] != false || p["allow_other"]["default"] != true {
			t.Errorf("%s: input schema lacks the choices: %s", tool.Name, b)
		}
		if _, ok := m.OutputSchema.Properties["chosen"]; !ok {
			t.Errorf("%s: no outputSchema naming the chosen options: %s", tool.Name, b)
		}
	}
	if seen != 3 {
		t.Fatalf("saw %d of the three tools", seen)
	}
}

func TestAnswerNamesTheChosenOptions(t *testing.T) {
	var reply []*pb.McpResultContent
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{ID: r.GetID(), Contents: reply}, nil
	}}
	c := newClient(t, f, Options{})
	txt := func(s string) *pb.McpResultContent {
		return &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: s}}
	}
	reply = []*pb.McpResultContent{txt("Stop"), txt("and tell me why"), txt("Continue")}
	r := call(t, c, "ask_question", map[string]any{
		"question": "Go on?", "multi_select": true,
		"options": []any{map[string]any{"label": "Continue", "description": "keep going"}, map[string]any{"label": "Stop"}},
	}, nil)
	if r.IsError {
		t.Fatalf("error: %s", text(r))
	}
	f.mu.Lock()
	q := f.asks[0].GetRequest().GetQuestions()
	f.mu.Unlock()
	if len(q) != 1 || len(q[0].GetOptions()) != 2 || q[0].GetOptions()[0].GetDescription() != "keep going" || !q[0].GetMultiple() || !q[0].GetCustom() {
		t.Fatalf("questions sent = %v", q)
	}
	if !strings.Contains(text(r), `The person chose the options "Continue", "Stop".`) || !strings.Contains(text(r), "and tell me why") {
		t.Errorf("text = %q", text(r))
	}
	b, _ := json.Marshal(r.StructuredContent)
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if !a.Answered || strings.Join(a.Chosen, "|") != "Continue|Stop" || a.Text != "and tell me why" {
		t.Errorf("structured content = %s", b)
	}

	// No options: the structured content is still there (outputSchema).
	reply = []*pb.McpResultContent{txt("yes")}
	r = call(t, c, "ask_question", map[string]any{"question": "ok?"}, nil)
	b, _ = json.Marshal(r.StructuredContent)
	if string(b) != `{"answered":true,"chosen":[],"images":0,"text":"yes"}` {
		t.Errorf("structured content without options = %s", b)
	}
}

func TestBadOptionsNameTheLimit(t *testing.T) {
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		t.Error("a bad request reached the server")
		return &pb.AskQuestionResponse{}, nil
	}}
	c := newClient(t, f, Options{})
	many := make([]any, wire.MaxOptions+1)
	for i := range many {
		many[i] = map[string]any{"label": string(rune('a' + i))}
	}
	for _, tc := range []struct {
		tool string
		opts []any
		want string
	}{
		{"ask_question", many, "at most 10"},
		{"ask_question", []any{map[string]any{"label": ""}}, "empty label"},
		{"task_finish", []any{map[string]any{"label": "A"}, map[string]any{"label": "A"}}, "unique"},
		{"work_report", []any{map[string]any{"label": strings.Repeat("x", 81)}}, "limit of 80 bytes"},
		{"ask_question", []any{map[string]any{"label": "A", "description": strings.Repeat("x", 601)}}, "limit of 600 bytes"},
	} {
		arg := map[string]string{"ask_question": "question"}[tc.tool]
		r := call(t, c, tc.tool, map[string]any{cmp.Or(arg, "summary"): "q", "options": tc.opts}, nil)
		if !r.IsError || !strings.Contains(text(r), tc.want) {
			t.Errorf("%s %v: %v %q, want an error naming %q", tc.tool, len(tc.opts), r.IsError, text(r), tc.want)
		}
	}
}

func TestFormOffersTheOptions(t *testing.T) {
	qs := []*pb.Question{{Options: []*pb.Option{{Label: "A"}, {Label: "B", Description: "bee"}}, Multiple: true}}
	f := formFor(wire.AskQuestion, "which?", qs)
	b, _ := json.Marshal(f.Params.RequestedSchema)
	if !strings.Contains(string(b), `"choice":{"description":"B: bee","items":{"enum":["A","B"],"type":"string"}`) || strings.Contains(string(b), `"answer"`) {
		t.Errorf("multi-select form without free text = %s", b)
	}
	// Only the options: at least one must be chosen (the server takes
	// nothing else).
	if !strings.Contains(string(b), `"minItems":1`) || !strings.Contains(string(b), `"required":["choice"]`) {
		t.Errorf("multi-select form without free text does not require a choice: %s", b)
	}
	qs[0].Multiple, qs[0].Custom = false, true
	b, _ = json.Marshal(formFor(wire.AskQuestion, "which?", qs).Params.RequestedSchema)
	if !strings.Contains(string(b), `"enum":["A","B"],"title":"Choose","type":"string"`) || !strings.Contains(string(b), `"answer"`) {
		t.Errorf("single-select form with free text = %s", b)
	}
	got, err := formAnswer(map[string]any{"choice": []any{"A", "B"}, "answer": " more "})
	if err != nil || strings.Join(got, "|") != "A|B|more" {
		t.Errorf("form answer = %q, %v", got, err)
	}
}

// TestMistypedFormIsNoAnswer: a client that does not check a form's
// answer against its schema sent an answer of the wrong type, and the
// request was settled with an empty reply the person never gave.
func TestMistypedFormIsNoAnswer(t *testing.T) {
	for _, content := range []any{
		map[string]any{"answer": []any{"ship it"}},
		map[string]any{"choice": 3},
		map[string]any{"choice": []any{"A", 2}},
		map[string]any{"choice": map[string]any{"A": true}},
		"ship it",
		nil,
	} {
		if got, err := formAnswer(content); err == nil {
			t.Errorf("form %#v taken as %q", content, got)
		}
	}
	if got, err := formAnswer(map[string]any{"choice": "A"}); err != nil || strings.Join(got, "|") != "A" {
		t.Errorf("a well-typed form = %q, %v", got, err)
	}
}

// TestTypedChoiceIsNotAlsoFreeText: a person who types an option's label
// in another case, or several labels in one line (an e-mail or chat
// reply), has chosen those options: the agent is told the choice once,
// not the typed words besides as if they were more to read, and the
// structured text stays empty.
func TestTypedChoiceIsNotAlsoFreeText(t *testing.T) {
	qs := []*pb.Question{{Options: []*pb.Option{{Label: "Continue"}, {Label: "Stop"}}, Multiple: true}}
	for _, typed := range []string{"continue", " Stop ", "continue, stop"} {
		r := toResult(wire.AskQuestion, &pb.AskQuestionResponse{Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: typed}},
		}}, qs)
		if len(r.Content) != 1 {
			t.Errorf("%q: %d contents %v, want the choice alone", typed, len(r.Content), r.Content)
		}
		if a, ok := r.StructuredContent.(answer); !ok || len(a.Chosen) == 0 || a.Text != "" {
			t.Errorf("%q: structured content %+v", typed, r.StructuredContent)
		}
	}
}

// An LLM writes what it would say to a person: "2m" for a timeout, "yes"
// for a flag, the options as one string, an option keyed "name". None of
// it may quietly turn into a default the agent did not ask for: each is
// refused, naming the argument and how to write it, before the server
// sees the question.
func TestMistypedArgumentsSayHowToWriteThem(t *testing.T) {
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		t.Errorf("a mistyped call reached the server: %v", r.GetRequest())
		return &pb.AskQuestionResponse{}, nil
	}}
	c := newClient(t, f, Options{})
	opts := []any{map[string]any{"label": "A"}, map[string]any{"label": "B"}}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"ask_question", map[string]any{"timeout": "2m"}, []string{`"timeout"`, "number of seconds", "300", `"2m"`}},
		{"task_finish", map[string]any{"timeout": "ten minutes"}, []string{`"timeout"`, "number of seconds"}},
		{"ask_question", map[string]any{"timeout": true}, []string{`"timeout"`, "number of seconds"}},
		{"ask_question", map[string]any{"timeout": "NaN"}, []string{`"timeout"`, "number of seconds", `"NaN"`}},
		{"task_finish", map[string]any{"timeout": "Infinity"}, []string{`"timeout"`, "number of seconds"}},
		{"ask_question", map[string]any{"options": opts, "multi_select": "yes"}, []string{`"multi_select"`, "true or false", `"yes"`}},
		{"work_report", map[string]any{"options": opts, "allow_other": "no"}, []string{`"allow_other"`, "true or false"}},
		// A flag is checked whether or not the call offers options: the
		// agent meant something by it, and a question without options
		// would otherwise reach the screens with the flag dropped.
		{"ask_question", map[string]any{"multi_select": "yes"}, []string{`"multi_select"`, "true or false", `"yes"`}},
		{"task_finish", map[string]any{"allow_other": "no"}, []string{`"allow_other"`, "true or false"}},
		{"ask_question", map[string]any{"options": []any{}, "multi_select": 1}, []string{`"multi_select"`, "true or false"}},
		{"ask_question", map[string]any{"options": "Yes, No"}, []string{`"options"`, `[{"label": "Yes"}, {"label": "No"}]`, "not a string"}},
		{"ask_question", map[string]any{"options": []any{map[string]any{"name": "Yes"}}}, []string{`option 1 has no "label"`, `"name"`, `{"label": "Yes"`}},
		{"ask_question", map[string]any{"options": []any{map[string]any{"label": 5}}}, []string{`option 1`, `"label" must be a string`}},
		{"ask_question", map[string]any{"question": []any{"q"}}, []string{`"question" must be a string`}},
		// Who asks, and from where: a number would be dropped for the
		// MCP client's name, or the server's working directory.
		{"ask_question", map[string]any{"agent_name": 7}, []string{`"agent_name" must be a string`}},
		{"task_finish", map[string]any{"reasoning_model_name": []any{"o3"}}, []string{`"reasoning_model_name" must be a string`}},
		{"work_report", map[string]any{"project_directory": map[string]any{"path": "/src"}}, []string{`"project_directory" must be a string`}},
	} {
		args := map[string]any{"question": "q"}
		if tc.tool != "ask_question" {
			args = map[string]any{"summary": "s"}
		}
		for k, v := range tc.args {
			args[k] = v
		}
		r := call(t, c, tc.tool, args, nil)
		for _, w := range tc.want {
			if !r.IsError || !strings.Contains(text(r), w) {
				t.Errorf("%s %v: error %v %q, want it to say %s", tc.tool, tc.args, r.IsError, text(r), w)
			}
		}
	}
}

// What an LLM writes that means what it says still works: a number of
// seconds in a string, a flag as "true".
func TestNumbersAndFlagsInStringsAreRead(t *testing.T) {
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "A"}}}}, nil
	}}
	c := newClient(t, f, Options{})
	r := call(t, c, "ask_question", map[string]any{"question": "q", "timeout": "300", "multi_select": "true",
		"options": []any{map[string]any{"label": "A"}, "B"}}, nil)
	if r.IsError {
		t.Fatalf("error: %s", text(r))
	}
	f.mu.Lock()
	req := f.asks[0].GetRequest()
	f.mu.Unlock()
	if req.GetTimeout() != 300 || !req.GetQuestions()[0].GetMultiple() || len(req.GetQuestions()[0].GetOptions()) != 2 {
		t.Errorf("sent timeout %v, multiple %v, options %v", req.GetTimeout(), req.GetQuestions()[0].GetMultiple(), req.GetQuestions()[0].GetOptions())
	}
}
