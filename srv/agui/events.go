package agui

import (
	"encoding/json"
	"net/http"
	"time"

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
	// rc sets each write's deadline, timeout long: a frontend that reads
	// nothing holds a run no longer (Options.SendTimeout).
	rc      *http.ResponseController
	timeout time.Duration
	open    map[string]bool
	ids     []string // open, in the order they started
	err     error    // the first write that failed: the client has gone, or reads nothing
}

// send writes m and flushes it within the stream's timeout.
func (s *stream) send(m *sse.Message) {
	if s.rc != nil {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
		defer func() { _ = s.rc.SetWriteDeadline(time.Time{}) }()
	}
	if s.err = s.sess.Send(m); s.err == nil {
		s.err = s.sess.Flush()
	}
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
	s.send(m)
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
	s.send(m)
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
