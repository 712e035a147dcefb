package e2e

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// TestClusterMCPEventsWhileNoOneCarries: an agent whose client shows
// forms makes two calls through instance A; the second one's form waits
// for the first one's (one form at a time). The second call's stream is
// cut and resumed through B, which carries it (A's progress comes
// there); B is killed (kill -9). While no instance carries the stream,
// the first form is answered and A sends the second call's form. The
// client resumes through C from the last event B gave it: the form
// comes there, as the events a resumed stream replays after
// Last-Event-ID.
func TestClusterMCPEventsWhileNoOneCarries(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	a := &rawMCP{t: t, url: c.srvs[0].URL + "/mcp"}
	resp := a.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-gap","version":"1"}}}`)
	_, _ = io.ReadAll(resp.Body)
	if a.sid = resp.Header.Get("Mcp-Session-Id"); a.sid == "" {
		t.Fatal("initialize gave no session ID")
	}
	resp = a.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.ReadAll(resp.Body)

	first := streamEvents(a.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"First?","project_directory":"/src"}}}`).Body)
	must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	var form json.RawMessage
	for form == nil {
		form = formIn(nextOf(t, first))
	}
	second := streamEvents(a.post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Second?","project_directory":"/src"},"_meta":{"progressToken":"p8"}}}`).Body)
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	last := ""
	for !strings.Contains(last, ".") {
		ev := nextOf(t, second)
		if formIn(ev) != nil {
			t.Fatal("the second call's form came while the first one's is open")
		}
		if ev.id != "" {
			last = ev.id
		}
	}
	a.cut()

	b := &rawMCP{t: t, url: c.srvs[1].URL + "/mcp", sid: a.sid}
	carried := streamEvents(b.get(last).Body)
	if ev := nextOf(t, carried); tagOf(ev.id) == tagOf(last) {
		t.Fatalf("the resume landed where the call runs (%s)", tagOf(last))
	}
	// A's progress comes through B: A takes B as its client's connection.
	for {
		ev := nextOf(t, carried)
		if ev.id != "" {
			last = ev.id
		}
		if strings.Contains(ev.data, `"notifications/progress"`) {
			break
		}
	}
	c.srvs[1].kill9(t)
	for ev := range carried {
		if ev.err == nil && ev.id != "" {
			last = ev.id
		}
	}

	// The first form's answer frees A's form slot: the second call's form
	// goes out while no instance carries its stream.
	ack := a.post(`{"jsonrpc":"2.0","id":` + string(form) + `,"result":{"action":"accept","content":{"answer":"Yes"}}}`)
	_, _ = io.ReadAll(ack.Body)
	if !c.srvs[0].logw.waitFor("for_request="+q.GetID(), 30*time.Second) {
		t.Fatal("the second call never sent its form")
	}

	cc := &rawMCP{t: t, url: c.srvs[2].URL + "/mcp", sid: a.sid}
	resumed := streamEvents(cc.get(last).Body)
	// Progress keeps coming while the form is lost: a guard on the whole
	// wait (a hang, not a measure).
	guard := time.NewTimer(60 * time.Second)
	defer guard.Stop()
	var form2 json.RawMessage
	for form2 == nil {
		var ev streamEvent
		select {
		case ev = <-resumed:
		case <-guard.C:
			t.Fatal("the form the call sent while no instance carried its stream never came on the resumed stream")
		}
		if ev.err != nil {
			t.Fatalf("the resumed stream: %v", ev.err)
		}
		if form2 = formIn(ev); form2 != nil && !strings.Contains(ev.data, "Second?") {
			t.Fatalf("a form that is not the second call's: %s", ev.data)
		}
	}
	// Its answer, through the instance of the resumed stream, answers
	// the second question where it was asked.
	ack = cc.post(`{"jsonrpc":"2.0","id":` + string(form2) + `,"result":{"action":"accept","content":{"answer":"Also yes"}}}`)
	_, _ = io.ReadAll(ack.Body)
	if got := awaitEnd(t, device, q.GetID()); got != "answered" {
		t.Fatalf("the second question ended with %q on the device, not answered by its form", got)
	}
}

// formIn is the JSON-RPC id of the form (elicitation/create) ev holds,
// nil when it holds none.
func formIn(ev streamEvent) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if ev.data != "" && json.Unmarshal([]byte(ev.data), &m) == nil && m.Method == "elicitation/create" {
		return m.ID
	}
	return nil
}
