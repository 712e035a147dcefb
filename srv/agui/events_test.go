package agui

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tmaxmax/go-sse"
)

// TestFinishClosesOpenToolCalls: the run's end is preceded by a
// TOOL_CALL_END for every tool call started and not ended
// (openToolCallIDs), and by none for those already ended. The stream is
// read back with go-sse's reader: one event per message, the JSON whole
// in its data, even one whose text holds line breaks.
func TestFinishClosesOpenToolCalls(t *testing.T) {
	rec := httptest.NewRecorder()
	sess, err := sse.Upgrade(rec, httptest.NewRequest("POST", "/agui", nil))
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{sess: sess, open: map[string]bool{}}
	s.emit(event{"type": RunStarted, "threadId": "t", "runId": "r"})
	s.emit(event{"type": TextMessageContent, "messageId": "m", "delta": "two\nlines\r\n\u2028"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "a", "toolCallName": "x"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "b", "toolCallName": "x"})
	s.emit(event{"type": ToolCallEnd, "toolCallId": "a"})
	s.emit(event{"type": ToolCallStart, "toolCallId": "c", "toolCallName": "x"})
	s.finish(event{"type": RunFinished, "threadId": "t", "runId": "r"})
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var got []string
	for e, err := range sse.Read(strings.NewReader(rec.Body.String()), nil) {
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
			t.Fatalf("event data %q: %v", e.Data, err)
		}
		s := ev["type"].(string)
		if id, ok := ev["toolCallId"].(string); ok {
			s += ":" + id
		}
		if d, ok := ev["delta"].(string); ok && d != "two\nlines\r\n\u2028" {
			t.Errorf("delta %q", d)
		}
		got = append(got, s)
	}
	want := "RUN_STARTED TEXT_MESSAGE_CONTENT TOOL_CALL_START:a TOOL_CALL_START:b TOOL_CALL_END:a TOOL_CALL_START:c TOOL_CALL_END:b TOOL_CALL_END:c RUN_FINISHED"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}
