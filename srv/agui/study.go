package agui

import (
	"encoding/json"

	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// A thread's runs in the study log. What crosses the relay (the user's
// message, the agent's messages, tool calls and results, state) is logged
// by the relay as for any host; the runs themselves, which mvp-0.2 has no
// message for, are logged here, in the same file with the same fields,
// before the frontend sees their end.
const (
	logRunStarted  = "agui.run.started"  // out: the frontend started a run
	logRunFinished = "agui.run.finished" // in: RUN_FINISHED
	logRunError    = "agui.run.error"    // in: RUN_ERROR, with its code and message
	logRunLost     = "agui.run.lost"     // internal: the frontend went away before the run's end
)

func (t *thread) logStarted(in *RunAgentInput) {
	tools := make([]string, 0, len(in.Tools))
	for _, tl := range in.Tools {
		tools = append(tools, tl.Name)
	}
	p := map[string]any{"threadId": in.ThreadID, "runId": in.RunID, "messages": len(in.Messages), "tools": tools}
	if n := len(in.Messages); n > 0 {
		p["lastRole"] = in.Messages[n-1].Role
	}
	t.logRun(studylog.Out, logRunStarted, p)
}

// logEnd logs the run's end event (RUN_FINISHED or RUN_ERROR).
func (t *thread) logEnd(in *RunAgentInput, ev event) {
	p := map[string]any{"threadId": in.ThreadID, "runId": in.RunID}
	typ := logRunFinished
	if ev["type"] == RunError {
		typ = logRunError
		p["code"], p["message"] = ev["code"], ev["message"]
	}
	t.logRun(studylog.In, typ, p)
}

func (t *thread) logRun(direction, typ string, p map[string]any) {
	b, _ := json.Marshal(p)
	t.Ext.Record(direction, relay.Envelope{Type: typ, Payload: b})
}
