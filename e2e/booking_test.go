package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/internal/testhost"
)

func joinHost(t *testing.T, s *server, o testhost.Options) *testhost.Host {
	t.Helper()
	h, err := testhost.Dial(s.URL, s.Token, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// step calls a tool and checks the result's ok/error line and that the
// text contains every want.
func step(t *testing.T, c *client.Client, tool string, args map[string]any, wantErr bool, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := callTool(ctx, c, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	txt := resultText(r)
	if r.IsError != wantErr {
		t.Fatalf("%s %v: isError=%v, want %v:\n%s", tool, args, r.IsError, wantErr, txt)
	}
	for _, w := range want {
		if !strings.Contains(txt, w) {
			t.Fatalf("%s %v: result lacks %q:\n%s", tool, args, w, txt)
		}
	}
	if strings.Contains(txt, "backendData") || strings.Contains(txt, "secret-seat-map") {
		t.Fatalf("%s: backendData reached the agent:\n%s", tool, txt)
	}
	if len(txt) > 40000 {
		t.Fatalf("%s: result of %d characters", tool, len(txt))
	}
	return txt
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	r, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestBookingThroughMCP drives a whole booking through agentassistant-mcp
// against a host written from the seed, then checks the study log.
func TestBookingThroughMCP(t *testing.T) {
	s := startServer(t, tokenA)
	h := joinHost(t, s, testhost.Options{})
	agent := startMCP(t, s, tokenA)
	var listChanged atomic.Int32
	agent.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			listChanged.Add(1)
		}
	})

	names := toolNames(t, agent)
	for _, want := range []string{"ask_question", "task_finish", "work_report", "get_ui_state", "call_ui_tool", "send_agent_message",
		"wait_user_message", "start_session", "end_session", "select", "next", "postMessage"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list lacks %s: %v", want, names)
		}
	}
	r, _ := agent.ListTools(context.Background(), mcp.ListToolsRequest{})
	for _, tl := range r.Tools {
		if tl.Name == "select" {
			schema, _ := json.Marshal(tl)
			if !strings.Contains(string(schema), `"reason"`) || !strings.Contains(string(schema), `"itemId"`) {
				t.Errorf("select schema = %s", schema)
			}
		}
	}

	step(t, agent, "select", map[string]any{"itemId": "m1", "reason": "r"}, true, "SESSION_NOT_ACTIVE")
	// The relay's words are for /agent/ws agents (session.start); an MCP
	// agent is told its own tool.
	step(t, agent, "end_session", nil, true, "SESSION_NOT_ACTIVE", "call start_session first")
	out := step(t, agent, "start_session", map[string]any{"study_id": "pilot-01", "participant_id": "P07"}, false, "Study session s-")
	sid := regexp.MustCompile(`s-\d{8}-\d{3}`).FindString(out)

	step(t, agent, "get_ui_state", nil, false, "stage: movie", "tools allowed now: select, next, postMessage", "Dune: Part Two", "study session: "+sid)
	step(t, agent, "select", map[string]any{"itemId": "m1"}, true, "reason")
	if slices.Contains(toolNames(t, agent), "setQuantity") {
		t.Fatal("setQuantity listed before the host declared it")
	}
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "setQuantity", "params": map[string]any{"quantity": 2}, "reason": "try"}, true,
		"error UNKNOWN_TOOL", "allowed now: select, next, postMessage")
	step(t, agent, "next", map[string]any{"reason": "nothing chosen yet"}, true, "error TOOL_EXECUTION_FAILED", "select a movie first", "stage: movie")
	step(t, agent, "select", map[string]any{"itemId": "m1", "reason": "The participant asked for Dune."}, false, "ok: select", `"movie":"m1"`)
	step(t, agent, "next", map[string]any{"reason": "Movie chosen; pick a date."}, false, "ok: next", "stage: date")
	step(t, agent, "select", map[string]any{"itemId": "d2", "reason": "Saturday suits them."}, false, `"date":"d2"`)
	step(t, agent, "next", map[string]any{"reason": "to showtimes"}, false, "stage: showtime")
	step(t, agent, "select", map[string]any{"itemId": "t2", "reason": "They prefer evenings."}, false, `"showtime":"t2"`)
	step(t, agent, "next", map[string]any{"reason": "to tickets"}, false, "stage: tickets", "setQuantity")

	// setQuantity was declared at the tickets stage: the tool list grew.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(toolNames(t, agent), "setQuantity") {
		if time.Now().After(deadline) {
			t.Fatal("setQuantity never became an MCP tool")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if listChanged.Load() == 0 {
		t.Error("no notifications/tools/list_changed when the tool set grew")
	}
	step(t, agent, "setQuantity", map[string]any{"quantity": -1, "reason": "test"}, true, "error INVALID_PARAMS", "quantity")
	step(t, agent, "setQuantity", map[string]any{"quantity": 2, "reason": "Two people."}, false, `"quantity":2`, `"total":24`)
	step(t, agent, "next", map[string]any{"reason": "to seats"}, false, "stage: seats")
	step(t, agent, "select", map[string]any{"itemId": "A2", "reason": "centre"}, false)
	step(t, agent, "select", map[string]any{"itemId": "A3", "reason": "next to it"}, false, `"seats":["A2","A3"]`)
	step(t, agent, "next", map[string]any{"reason": "to confirm"}, false, "stage: confirm")
	step(t, agent, "send_agent_message", map[string]any{"text": "Booking two seats for Dune on Saturday evening."}, false, "posted")

	h.SayUser("Sounds good, go ahead.")
	step(t, agent, "wait_user_message", map[string]any{"timeout": 5}, false, "The participant wrote: Sounds good, go ahead.", "stage: confirm")
	step(t, agent, "wait_user_message", map[string]any{"timeout": 1}, false, "No message from the participant within 1 seconds")

	step(t, agent, "next", map[string]any{"reason": "The participant confirmed."}, false, "stage: done", `"booked":true`)
	if spec := h.UISpec(); spec["booked"] != true || !slices.Equal(spec["selections"].(map[string]any)["seats"].([]string), []string{"A2", "A3"}) {
		t.Errorf("host state = %v", spec)
	}
	var agentMsg bool
	for _, m := range h.Seen() {
		if m["type"] == "agent.message" {
			agentMsg = true
		}
		if m["type"] == "tool.call" {
			if p := m["payload"].(map[string]any); p["reason"] == "" {
				t.Errorf("tool.call without reason reached the host: %v", m)
			}
		}
	}
	if !agentMsg {
		t.Error("the host never got the agent message")
	}

	step(t, agent, "end_session", map[string]any{"reason": "study-complete"}, false, "Study session "+sid+" ended", "logs/study/"+sid+".jsonl")
	if spec := h.UISpec(); spec["stage"] != "movie" || spec["booked"] != false {
		t.Errorf("host not reset after session.end: %v", spec)
	}
	checkStudyLog(t, filepath.Join(s.Data, "logs", "study", sid+".jsonl"), sid)
}

func checkStudyLog(t *testing.T, path, sid string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "backendData") || strings.Contains(string(raw), "secret-seat-map") || strings.Contains(string(raw), tokenA) {
		t.Error("study log holds backendData or the token")
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 1<<20)
	counts := map[string]int{}
	i := 0
	for sc.Scan() {
		var e struct {
			SessionID  string          `json:"sessionId"`
			EventIndex int             `json:"eventIndex"`
			Timestamp  string          `json:"timestamp"`
			Direction  string          `json:"direction"`
			Type       string          `json:"type"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if e.SessionID != sid || e.EventIndex != i || e.Type == "" || len(e.Payload) == 0 {
			t.Errorf("line %d: %s", i, sc.Bytes())
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", e.Timestamp); err != nil {
			t.Errorf("line %d timestamp: %v", i, err)
		}
		counts[e.Direction+" "+e.Type]++
		i++
	}
	for k, min := range map[string]int{
		"in session.start": 1, "out session.started": 1, "in tool.call": 15, "out tool.result": 12,
		"out error": 3, "in agent.message": 1, "out user.message": 1, "out state.updated": 10, "in session.end": 1, "out session.ended": 1,
		"in snapshot.get": 1, "out snapshot.state": 1,
	} {
		if counts[k] < min {
			t.Errorf("log has %d %q events, want at least %d (all: %v)", counts[k], k, min, counts)
		}
	}
}

func TestUIToolsWithoutHost(t *testing.T) {
	s := startServer(t, tokenA)
	agent := startMCP(t, s, tokenA)
	// NO_ACTIVE_SPEC at once: a call left to its deadline would end
	// TOOL_EXECUTION_FAILED.
	step(t, agent, "get_ui_state", nil, true, "NO_ACTIVE_SPEC", s.URL+"/booking?token=")
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "select", "params": map[string]any{"itemId": "m1"}, "reason": "r"}, true,
		"NO_ACTIVE_SPEC", "/booking?token=")
}

func TestHostGoneMidCall(t *testing.T) {
	s := startServer(t, tokenA)
	joinHost(t, s, testhost.Options{DropOn: "next"})
	agent := startMCP(t, s, tokenA)
	step(t, agent, "start_session", nil, false)
	step(t, agent, "select", map[string]any{"itemId": "m2", "reason": "r"}, false)
	// Told of the disconnect, not left to the call's deadline.
	step(t, agent, "next", map[string]any{"reason": "r"}, true, "TOOL_EXECUTION_FAILED", "disconnected before answering; the action may or may not have happened")
	step(t, agent, "get_ui_state", nil, true, "NO_ACTIVE_SPEC")
}
