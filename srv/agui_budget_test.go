package srv_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// newBudgetServer serves the whole server with a small per-token relay
// budget; AG-UI's waits are short, so a run left to them ends soon and
// says so (no_agent, agent_gone) rather than hanging the test.
func newBudgetServer(t *testing.T, budget int64) string {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := studylog.Open(t.TempDir(), studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, StudyLogs: logs, Relay: relay.Options{MaxStatePerToken: budget},
		AGUI: agui.Options{AgentWait: 200 * time.Millisecond, AgentIdle: 200 * time.Millisecond}})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL
}

// TestAGUIMessageOverBudget: a person's message that would pass the
// token's relay budget ([relay] max_state_bytes_per_token) is not lost
// unseen: the run ends at once with RUN_ERROR message_not_taken, saying
// the message did not reach the agent and why. Sent again (same message
// id), it is tried again, not skipped as delivered; a message that fits
// reaches the agent.
func TestAGUIMessageOverBudget(t *testing.T) {
	url := newBudgetServer(t, 4096)
	big := strings.Repeat("x", 8000)
	in := map[string]any{"threadId": "th-budget", "runId": "r1", "tools": bgTool,
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": big}}}
	for try := range 2 {
		evs := postAGUI(t, url, tokA, in).until()
		last := evs[len(evs)-1]
		msg, _ := last["message"].(string)
		if last["type"] != "RUN_ERROR" || last["code"] != "message_not_taken" ||
			!strings.Contains(msg, "[relay] max_state_bytes_per_token") || !strings.Contains(msg, "not passed to the agent") {
			t.Fatalf("try %d: events %s, last %v", try, types(evs), last)
		}
	}
	in["runId"] = "r2"
	in["messages"] = []map[string]any{{"id": "u2", "role": "user", "content": "small"}}
	run := postAGUI(t, url, tokA, in)
	if ev := run.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("first event %v", ev)
	}
	um, err := uiRelayClient(url).WaitUserMessage(context.Background(), &pb.WaitUserMessageRequest{RelaySession: "th-budget", TimeoutMs: 5000})
	if err != nil || !um.GetReceived() || um.GetText() != "small" {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
}

// TestAGUIStateOverBudget: a run whose state and tools would pass the
// token's budget is refused before anything changes (RUN_ERROR
// state_not_kept, saying why): its message does not reach the agent
// against tools it cannot see.
func TestAGUIStateOverBudget(t *testing.T) {
	url := newBudgetServer(t, 4096)
	in := map[string]any{"threadId": "th-state", "runId": "r1", "tools": bgTool,
		"state":    map[string]any{"big": strings.Repeat("s", 8000)},
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": "hi"}}}
	evs := postAGUI(t, url, tokA, in).until()
	last := evs[len(evs)-1]
	msg, _ := last["message"].(string)
	if last["type"] != "RUN_ERROR" || last["code"] != "state_not_kept" || !strings.Contains(msg, "[relay] max_state_bytes_per_token") {
		t.Fatalf("events %s, last %v", types(evs), last)
	}
	// Smaller, the same message goes (it was not taken as delivered).
	in["runId"], in["state"] = "r2", map[string]any{}
	run := postAGUI(t, url, tokA, in)
	if ev := run.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("first event %v", ev)
	}
	um, err := uiRelayClient(url).WaitUserMessage(context.Background(), &pb.WaitUserMessageRequest{RelaySession: "th-state", TimeoutMs: 5000})
	if err != nil || !um.GetReceived() || um.GetText() != "hi" {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
}
