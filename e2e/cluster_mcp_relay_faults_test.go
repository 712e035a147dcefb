package e2e

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// progressOf is the progress a notifications/progress event says, -1
// for any other event.
func progressOf(t *testing.T, data string) int {
	t.Helper()
	var m struct {
		Method string `json:"method"`
		Params struct {
			Progress int `json:"progress"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(data), &m) != nil || m.Method != "notifications/progress" {
		return -1
	}
	return m.Params.Progress
}

// TestClusterMCPRelayCarrierKilled: a call shows its form on instance A,
// its stream is cut and resumed through B, which is killed -9 while it
// carries the stream; the client resumes it through C with the last
// event B gave it. C takes over: the call's progress goes on there, each
// notification once and in order after those B gave, the form's answer
// POSTed through C reaches the call on A, and C's stream carries the
// call's response once.
func TestClusterMCPRelayCarrierKilled(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[0], tokenA, "phone")
	agent := &rawMCP{t: t, url: c.srvs[0].URL + "/mcp"}
	resp := agent.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-forms","version":"1"}}}`)
	_, _ = io.ReadAll(resp.Body)
	if agent.sid = resp.Header.Get("Mcp-Session-Id"); agent.sid == "" {
		t.Fatal("initialize gave no session ID")
	}
	resp = agent.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.ReadAll(resp.Body)

	resp = agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src"},"_meta":{"progressToken":"p1"}}}`)
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	events := streamEvents(resp.Body)
	var form json.RawMessage
	last := ""
	for form == nil || !strings.Contains(last, ".") {
		ev := nextOf(t, events)
		if ev.id != "" {
			last = ev.id
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if ev.data != "" && json.Unmarshal([]byte(ev.data), &m) == nil && m.Method == "elicitation/create" {
			form = m.ID
		}
	}
	agent.cut()

	// B carries it: a progress notification of A's comes there.
	agent.url = c.srvs[1].URL + "/mcp"
	events = streamEvents(agent.get(last).Body)
	seen := -1
	for seen < 0 {
		ev := nextOf(t, events)
		if ev.id != "" {
			last = ev.id
		}
		if p := progressOf(t, ev.data); p >= 0 {
			seen = p
		} else if ev.data != "" {
			t.Fatalf("B's stream before any progress: %s", ev.data)
		}
	}
	c.srvs[1].kill9(t)
	agent.cut()

	// C, from the last event B gave.
	agent.url = c.srvs[2].URL + "/mcp"
	events = streamEvents(agent.get(last).Body)
	if first := nextOf(t, events); tagOf(first.id) == tagOf(last) {
		t.Fatalf("the resume through C was served by B's log (%s)", first.id)
	}
	for range 2 {
		ev := nextOf(t, events)
		p := progressOf(t, ev.data)
		if p < 0 {
			t.Fatalf("C's stream: %s, want progress", ev.data)
		}
		if p <= seen {
			t.Fatalf("progress %d on C after %d on B: an event again, or out of order", p, seen)
		}
		seen = p
	}
	ack := agent.post(`{"jsonrpc":"2.0","id":` + string(form) + `,"result":{"action":"accept","content":{"answer":"Ship it"}}}`)
	_, _ = io.ReadAll(ack.Body)
	if got := awaitEnd(t, device, q.GetID()); got != "answered" {
		t.Fatalf("the question ended with %q on the device, not answered by the form", got)
	}
	responses := 0
	for ev := range events {
		if ev.err != nil {
			t.Fatalf("C's stream: %v", ev.err)
		}
		if p := progressOf(t, ev.data); p >= 0 {
			if p <= seen {
				t.Fatalf("progress %d after %d", p, seen)
			}
			seen = p
		}
		if strings.Contains(ev.data, `"id":7`) {
			responses++
			if !strings.Contains(ev.data, "Ship it") || strings.Contains(ev.data, `"isError":true`) {
				t.Fatalf("the call's response: %s", ev.data)
			}
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times on C's stream", responses)
	}
}

// TestClusterMCPRelayOriginKilled: a call asks on A, its stream is cut
// and resumed through B, which hears A's progress; A is killed -9. The
// person answers on a device of B: the answer comes from the request's
// record as the call's response on B's stream, once, within originWait
// of it (A, heard before, says nothing more), and the stream ends.
func TestClusterMCPRelayOriginKilled(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[1], tokenA, "phone")
	agent := &rawMCP{t: t, url: c.srvs[0].URL + "/mcp"}
	agent.initialize()
	resp := agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src"},"_meta":{"progressToken":"p1"}}}`)
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	events := streamEvents(resp.Body)
	last := ""
	for !strings.Contains(last, ".") {
		if ev := nextOf(t, events); ev.id != "" {
			last = ev.id
		}
	}
	agent.cut()

	agent.url = c.srvs[1].URL + "/mcp"
	events = streamEvents(agent.get(last).Body)
	for progressOf(t, nextOf(t, events).data) < 0 {
	}
	c.srvs[0].kill9(t)
	if err := device.Send(wstest.TextReply(q.GetID(), "Ship it")); err != nil {
		t.Fatal(err)
	}
	responses := 0
	for ev := range events { // a stream that never ends is the failure (go test -timeout)
		if ev.err != nil {
			t.Fatalf("B's stream: %v", ev.err)
		}
		if strings.Contains(ev.data, `"id":7`) {
			responses++
			if !strings.Contains(ev.data, "Ship it") || strings.Contains(ev.data, `"isError":true`) {
				t.Fatalf("the call's response: %s", ev.data)
			}
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times on B's stream", responses)
	}
}
