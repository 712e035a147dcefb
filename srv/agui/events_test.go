package agui

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFinishClosesOpenToolCalls: the run's end is preceded by a
// TOOL_CALL_END for every tool call started and not ended
// (openToolCallIDs), and by none for those already ended.
func TestFinishClosesOpenToolCalls(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &stream{w: rec, fl: rec, open: map[string]bool{}}
	s.emit(event{"type": RunStarted, "threadId": "t", "runId": "r"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "a", "toolCallName": "x"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "b", "toolCallName": "x"})
	s.emit(event{"type": ToolCallEnd, "toolCallId": "a"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "c", "toolCallName": "x"})
	s.finish(event{"type": RunFinished, "threadId": "t", "runId": "r"})
	var got []string
	for _, block := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
		data, ok := strings.CutPrefix(block, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("not one data line: %q", block)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		s := ev["type"].(string)
		if id, ok := ev["toolCallId"].(string); ok {
			s += ":" + id
		}
		got = append(got, s)
	}
	want := "RUN_STARTED TOOL_CALL_START:a TOOL_CALL_START:b TOOL_CALL_END:a TOOL_CALL_START:c TOOL_CALL_END:b TOOL_CALL_END:c RUN_FINISHED"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}
