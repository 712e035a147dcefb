package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterMCPCancelElsewhere: an agent on /mcp behind a round-robin
// balancer (a connection per request, so each lands on the next
// instance) asks, and cancels the call while the question is with the
// person; the notifications/cancelled lands on another instance than
// the call. The question leaves the device, and the call ends saying it
// was cancelled, as on one instance.
func TestClusterMCPCancelElsewhere(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	tr, _ := httpAgent(t, c.lb.URL+"/mcp")
	ctx := context.Background()
	type result struct {
		r   *transport.JSONRPCResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(42)),
			Method: string(mcp.MethodToolsCall), Params: map[string]any{"name": "ask_question", "arguments": map[string]any{"question": "Ship it?"}}})
		done <- result{r, err}
	}()
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	if q.GetRequest().GetQuestion() != "Ship it?" {
		t.Fatalf("the device has %v", q)
	}
	// The call is in progress on one instance (the device has its
	// question); the cancel is the balancer's next connection, so the
	// next instance's.
	if err := tr.SendNotification(ctx, cancelled(42)); err != nil {
		t.Fatal(err)
	}
	if got := awaitEnd(t, device, q.GetID()); got != "cancelled" {
		t.Fatalf("the question ended with %q on the device, not withdrawn by the cancel", got)
	}
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
		var r mcp.CallToolResult
		if err := json.Unmarshal(res.r.Result, &r); err != nil {
			t.Fatalf("the call's response %s: %v", res.r.Result, err)
		}
		if !r.IsError || !strings.Contains(resultText(&r), "The call was cancelled") {
			t.Fatalf("the call's response: %s", res.r.Result)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the cancelled call never ended")
	}
}

// TestClusterMCPCancelResumedElsewhere: a call's stream is cut while
// the question is with the person and resumed through another instance;
// the client's cancel lands on the third. The question leaves the device,
// and the resumed stream carries the call's response saying it was
// cancelled.
func TestClusterMCPCancelResumedElsewhere(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	agent := &rawMCP{t: t, url: c.lb.URL + "/mcp"}
	agent.initialize()
	q, last := askAndCut(t, agent, device, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ship it?","project_directory":"/src"}}}`)
	resumed := agent.get(last)
	events := bufio.NewReader(resumed.Body)
	if first := mustEvent(t, events); tagOf(first.id) == tagOf(last) {
		t.Fatalf("the resume landed where the call runs (%s)", tagOf(last))
	}
	resp := agent.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"stopped"}}`)
	_, _ = io.ReadAll(resp.Body)
	if got := awaitEnd(t, device, q.GetID()); got != "cancelled" {
		t.Fatalf("the question ended with %q on the device, not withdrawn by the cancel", got)
	}
	for {
		ev, err := nextEvent(events)
		if err != nil {
			t.Fatalf("the resumed stream ended without the call's response: %v", err)
		}
		if ev.data == "" {
			continue
		}
		if !strings.Contains(ev.data, `"id":7`) || !strings.Contains(ev.data, "The call was cancelled") {
			t.Fatalf("the call's response: %s", ev.data)
		}
		break
	}
}

// TestClusterMCPDeleteEverywhere: every instance serves an agent's
// session (behind the balancer, and each with a stream open on it); the
// client ends the session (DELETE), which lands on one instance. Every
// instance ends its stream and refuses the session from then on (404),
// as the one that got the DELETE does.
func TestClusterMCPDeleteEverywhere(t *testing.T) {
	c := startCluster(t)
	tr, agent := httpAgent(t, c.lb.URL+"/mcp")
	sid := tr.GetSessionId()
	ended := make([]chan struct{}, len(c.srvs))
	for i, s := range c.srvs {
		if code := mcpStatus(t, s, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); code != http.StatusOK {
			t.Fatalf("instance %d serves the session with %d", i, code)
		}
		req, err := http.NewRequest(http.MethodGet, s.URL+"/mcp", nil)
		if err != nil {
			t.Fatal(err)
		}
		mcpHeaders(req, sid)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("instance %d: the session's stream: %d", i, resp.StatusCode)
		}
		ended[i] = make(chan struct{})
		go func() {
			defer close(ended[i])
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	if err := agent.Close(); err != nil { // DELETE, through the balancer
		t.Fatal(err)
	}
	for i := range c.srvs {
		select {
		case <-ended[i]:
		case <-time.After(10 * time.Second):
			t.Errorf("instance %d still streams to the session its client ended", i)
		}
	}
	for i, s := range c.srvs {
		if code := mcpStatus(t, s, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`); code != http.StatusNotFound {
			t.Errorf("instance %d answers the session its client ended with %d, not 404", i, code)
		}
	}
}

// httpAgent is an MCP client of the Streamable HTTP transport (mcp-go's,
// protocol 2025-11-25) that opens a connection per request, initialized.
func httpAgent(t *testing.T, url string) (*transport.StreamableHTTP, *client.Client) {
	t.Helper()
	// Every request carries the token, the DELETE of Close too (which
	// the transport sends without its configured headers).
	perRequest := &http.Client{Transport: bearer{&http.Transport{DisableKeepAlives: true}}}
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(perRequest))
	if err != nil {
		t.Fatal(err)
	}
	agent := client.NewClient(tr, client.WithProtocolVersion("2025-11-25"))
	t.Cleanup(func() { agent.Close() })
	ctx := context.Background()
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-http", Version: "1"}
	if _, err := agent.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return tr, agent
}

type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tokenA)
	return b.next.RoundTrip(r)
}

func cancelled(id int64) mcp.JSONRPCNotification {
	return mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": "the user stopped it"}}}}
}

func mcpHeaders(req *http.Request, sid string) {
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
}

// mcpStatus is the status of a POST of body in session sid, sent to s.
func mcpStatus(t *testing.T, s *server, sid, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	mcpHeaders(req, sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode
}

// awaitEnd waits until the device is told how request id ended: its
// reason ("cancelled", "timeout", ...) or "answered".
func awaitEnd(t *testing.T, d *wstest.Client, id string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := d.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("the question stays on the device: %v", err)
		}
		switch m.Cmd {
		case "RequestCancelled":
			if n := m.GetRequestCancelledNotification(); n.GetRequestId() == id {
				return n.GetReason()
			}
		case "AskQuestionReplyNotification":
			return "answered"
		}
	}
}

// askAndCut posts a call that asks the device, waits until an event ID
// of its stream carries its request (so another instance can resume
// it), and cuts the agent's connections: the question, and that ID.
func askAndCut(t *testing.T, agent *rawMCP, device *wstest.Client, call string) (*pb.AskQuestionRequest, string) {
	t.Helper()
	resp := agent.post(call)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("the call's response is %q, not a stream", ct)
	}
	events := bufio.NewReader(resp.Body)
	last := mustEvent(t, events).id
	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	last = askedID(t, agent, events, last)
	agent.cut()
	return q, last
}
