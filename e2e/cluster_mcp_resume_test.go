package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterMCPResumeElsewhere: an agent on /mcp behind a round-robin
// balancer (a connection per request, so each lands on the next
// instance) asks; its call's stream is cut while the question is with
// the person (the connection closed); the client resumes it with
// Last-Event-ID, which lands on another instance. A device answers, while
// the stream is resumed or before (no call waits then, or the cut call
// still does), and the answer arrives once: as the call's response on the
// resumed stream, and not again to the project's next call.
//
// mcp-go's client resumes only a stream the server ended, not one that
// broke off, so the agent here speaks the transport itself.
func TestClusterMCPResumeElsewhere(t *testing.T) {
	for _, answerFirst := range []bool{false, true} {
		name := "answered once resumed"
		if answerFirst {
			name = "answered while cut"
		}
		t.Run(name, func(t *testing.T) { resumeElsewhere(t, answerFirst) })
	}
}

func resumeElsewhere(t *testing.T, answerFirst bool) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	agent := &rawMCP{t: t, url: c.lb.URL + "/mcp"}
	agent.initialize()

	resp := agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src"}}}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("the call's response is %q, not a stream", ct)
	}
	events := bufio.NewReader(resp.Body)
	last := mustEvent(t, events).id
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	if q.GetRequest().GetQuestion() != "Ship it?" {
		t.Fatalf("the device has %v", q)
	}
	last = askedID(t, agent, events, last)
	agent.cut()
	if answerFirst {
		if err := device.Send(wstest.TextReply(q.GetID(), "Ship it")); err != nil {
			t.Fatal(err)
		}
	}

	resumed := agent.get(last)
	events = bufio.NewReader(resumed.Body)
	first := mustEvent(t, events)
	if tagOf(first.id) == tagOf(last) {
		t.Fatalf("the resume landed where the call runs (%s): the balancer sent it to the same instance", tagOf(last))
	}
	if !answerFirst {
		if err := device.Send(wstest.TextReply(q.GetID(), "Ship it")); err != nil {
			t.Fatal(err)
		}
	}
	if n := responses(t, events, "Ship it"); n != 1 {
		t.Fatalf("the call's response came %d times on the resumed stream", n)
	}

	// The project's next call is asked, not handed the answer again.
	next := agent.post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"And now?","project_directory":"/src"}}}`)
	q = must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	if q.GetRequest().GetQuestion() != "And now?" {
		t.Fatalf("the device has %v", q)
	}
	if err := device.Send(wstest.TextReply(q.GetID(), "Rest")); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(next.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "Rest") || strings.Contains(string(body), "Ship it") {
		t.Fatalf("the project's next call: %s", body)
	}
}

// responses reads a resumed stream of call 7 to its end and counts the
// call's responses, each of which must be the answer want.
func responses(t *testing.T, events *bufio.Reader, want string) int {
	t.Helper()
	n := 0
	for {
		ev, err := nextEvent(events)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("the resumed stream: %v", err)
		}
		if ev.data == "" {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result *struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil || string(m.ID) != "7" || m.Result == nil {
			t.Fatalf("an event of the resumed stream: %s", ev.data)
		}
		if m.Result.IsError || len(m.Result.Content) == 0 || !strings.Contains(m.Result.Content[0].Text, want) {
			t.Fatalf("the call's response: %s", ev.data)
		}
		n++
	}
}

// askedID is the ID of the event of the call's stream whose ID carries
// its request, once it asked: last (the stream's first event's), or that
// of the one after it.
func askedID(t *testing.T, agent *rawMCP, events *bufio.Reader, last string) string {
	t.Helper()
	if strings.Contains(last, ".") {
		return last
	}
	got := make(chan sseEvent, 1)
	go func() {
		ev, _ := nextEvent(events) // ends at the cut at the latest
		got <- ev
	}()
	select {
	case ev := <-got:
		last = ev.id
	case <-time.After(10 * time.Second):
	}
	if !strings.Contains(last, ".") {
		agent.cut()
		t.Fatalf("no event ID of the call's stream carries its request (last %q): another instance cannot resume it", last)
	}
	return last
}

// rawMCP is an MCP client of the Streamable HTTP transport (protocol
// 2025-11-25) that opens a connection per request and can cut them.
type rawMCP struct {
	t   *testing.T
	url string
	sid string

	mu    sync.Mutex
	conns []net.Conn
}

func (a *rawMCP) client() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			a.mu.Lock()
			a.conns = append(a.conns, conn)
			a.mu.Unlock()
		}
		return conn, err
	}}}
}

func (a *rawMCP) do(method, body string, header map[string]string) *http.Response {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if a.sid != "" {
		req.Header.Set("Mcp-Session-Id", a.sid)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return resp
}

func (a *rawMCP) post(body string) *http.Response { return a.do(http.MethodPost, body, nil) }

// get resumes a stream after lastID.
func (a *rawMCP) get(lastID string) *http.Response {
	return a.do(http.MethodGet, "", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": lastID})
}

func (a *rawMCP) initialize() {
	a.t.Helper()
	resp := a.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	_, _ = io.ReadAll(resp.Body)
	if a.sid = resp.Header.Get("Mcp-Session-Id"); a.sid == "" {
		a.t.Fatal("initialize gave no session ID")
	}
	resp = a.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.ReadAll(resp.Body)
}

// cut closes every connection the client opened.
func (a *rawMCP) cut() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
	a.conns = nil
}

type sseEvent struct{ id, data string }

// nextEvent reads the next event of an SSE stream.
func nextEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && seen {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if seen {
				return ev, nil
			}
			continue
		}
		seen = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "id":
			ev.id = v
		case "data":
			ev.data += v
		}
	}
}

func mustEvent(t *testing.T, r *bufio.Reader) sseEvent {
	t.Helper()
	ev, err := nextEvent(r)
	if err != nil {
		t.Fatal(err)
	}
	if ev.id == "" {
		t.Fatalf("an event without an ID: %q", ev.data)
	}
	return ev
}

// tagOf is the tag of an event ID: which instance's log gave it.
func tagOf(id string) string {
	tag, _, _ := strings.Cut(id, "-")
	return tag
}
