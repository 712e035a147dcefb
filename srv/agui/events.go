package agui

import (
	"encoding/json"

	"github.com/tmaxmax/go-sse"
)

// The AG-UI event types, spelt as @ag-ui/core's EventType.
const (
	RunStarted         = "RUN_STARTED"
	RunFinished        = "RUN_FINISHED"
	RunError           = "RUN_ERROR"
	TextMessageStart   = "TEXT_MESSAGE_START"
	TextMessageContent = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     = "TEXT_MESSAGE_END"
	ToolCallStart      = "TOOL_CALL_START"
	ToolCallArgs       = "TOOL_CALL_ARGS"
	ToolCallEnd        = "TOOL_CALL_END"
	Custom             = "CUSTOM"
)

// customToolNames is the CUSTOM event that tells the frontend, after
// RUN_STARTED, which of its tools the agent knows by another name
// (a.b is a_b) and which the MCP bridge cannot list as tools of their
// own (they shadow its tools, or have other characters), so the agent
// reaches them only through call_ui_tool: {"tools": [{"name", "mcpName"?,
// "note"?}]}.
const customToolNames = "agentassistant.tool_names"

// event is one AG-UI event; field names are @ag-ui/core's (camelCase).
type event map[string]any

// stream writes a run's events as Server-Sent Events through go-sse,
// one event a message with the JSON in its data field. It keeps the tool
// calls started and not ended (the openToolCallIDs of the two-phase
// design), so finish closes them before the run's end.
type stream struct {
	sess *sse.Session
	open map[string]bool
	ids  []string // open, in the order they started
	err  error    // the first write that failed: the client has gone
}

func (s *stream) emit(ev event) {
	switch ev["type"] {
	case ToolCallStart:
		id, _ := ev["toolCallId"].(string)
		s.open[id] = true
		s.ids = append(s.ids, id)
	case ToolCallEnd:
		id, _ := ev["toolCallId"].(string)
		delete(s.open, id)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(event{"type": RunError, "message": "encode event: " + err.Error()})
	}
	if s.err != nil {
		return
	}
	m := &sse.Message{}
	m.AppendData(string(b))
	if s.err = s.sess.Send(m); s.err == nil {
		s.err = s.sess.Flush()
	}
}

// keepAlive writes an SSE comment: no event, only bytes on a quiet
// stream, so that a proxy between the frontend and the server does not
// cut a run an agent is still working on.
func (s *stream) keepAlive() {
	if s.err != nil {
		return
	}
	m := &sse.Message{}
	m.AppendComment("keep-alive")
	if s.err = s.sess.Send(m); s.err == nil {
		s.err = s.sess.Flush()
	}
}

// finish ends the run with last (RUN_FINISHED or RUN_ERROR), after a
// TOOL_CALL_END for every tool call still open.
func (s *stream) finish(last event) {
	for _, id := range s.ids {
		if s.open[id] {
			s.emit(event{"type": ToolCallEnd, "toolCallId": id})
		}
	}
	s.emit(last)
}
