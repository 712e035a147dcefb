package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// TestClusterMCPProgressAndFormElsewhere: an agent on /mcp behind a
// round-robin balancer (a connection per request) whose client shows
// forms asks with a progressToken; the call shows its form in the
// client, then its stream is cut and resumed through the next instance.
// The call's progress notifications, sent where it began, come on the
// resumed stream; the form's answer, POSTed through the third instance,
// reaches the call, which answers the question with it: the device is
// told, and the resumed stream carries the call's response, once.
func TestClusterMCPProgressAndFormElsewhere(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	agent := &rawMCP{t: t, url: c.lb.URL + "/mcp"}
	resp := agent.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-forms","version":"1"}}}`)
	_, _ = io.ReadAll(resp.Body)
	if agent.sid = resp.Header.Get("Mcp-Session-Id"); agent.sid == "" {
		t.Fatal("initialize gave no session ID")
	}
	resp = agent.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.ReadAll(resp.Body)

	resp = agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src"},"_meta":{"progressToken":"p1"}}}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("the call's response is %q, not a stream", ct)
	}
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	// The form, and an event ID that carries the call's request.
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

	resumed := agent.get(last)
	events = streamEvents(resumed.Body)
	if first := nextOf(t, events); tagOf(first.id) == tagOf(last) {
		t.Fatalf("the resume landed where the call runs (%s)", tagOf(last))
	}
	for {
		ev := nextOf(t, events)
		if strings.Contains(ev.data, `"notifications/progress"`) {
			if !strings.Contains(ev.data, `"progressToken":"p1"`) {
				t.Fatalf("a progress notification for another token: %s", ev.data)
			}
			break
		}
	}
	// The balancer's next connection: the third instance.
	ack := agent.post(`{"jsonrpc":"2.0","id":` + string(form) + `,"result":{"action":"accept","content":{"answer":"Ship it"}}}`)
	_, _ = io.ReadAll(ack.Body)
	if got := awaitEnd(t, device, q.GetID()); got != "answered" {
		t.Fatalf("the question ended with %q on the device, not answered by the form", got)
	}
	responses := 0
	for ev := range events {
		if ev.err != nil {
			t.Fatalf("the resumed stream: %v", ev.err)
		}
		if !strings.Contains(ev.data, `"id":7`) {
			continue
		}
		responses++
		if !strings.Contains(ev.data, "Ship it") || strings.Contains(ev.data, `"isError":true`) {
			t.Fatalf("the call's response: %s", ev.data)
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times on the resumed stream", responses)
	}
}

type streamEvent struct {
	sseEvent
	err error
}

// streamEvents reads r's events onto a channel until it ends; a read
// error is its last.
func streamEvents(r io.Reader) <-chan streamEvent {
	ch := make(chan streamEvent, 64)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			ev, err := nextEvent(br)
			if errors.Is(err, io.EOF) {
				return
			}
			ch <- streamEvent{ev, err}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// nextOf is the next event of ch; it fails the test when the stream
// ends or when nothing comes for long (progress comes every 10 s).
func nextOf(t *testing.T, ch <-chan streamEvent) streamEvent {
	t.Helper()
	guard := time.NewTimer(30 * time.Second) // a hang, not a measure
	defer guard.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		if ev.err != nil {
			t.Fatalf("the stream: %v", ev.err)
		}
		return ev
	case <-guard.C:
		t.Fatal("nothing came on the stream")
	}
	return streamEvent{}
}
