package mcphttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// sharedKey stands for the key a cluster's instances share.
var sharedKey = []byte("0123456789abcdef0123456789abcdef")

// newInstances serves n Handlers that share key, as a cluster's
// instances: each on its own URL (bases), and all behind one URL (lb)
// that sends each request to the next, as a balancer without affinity
// does with a client that opens a connection per request.
func newInstances(t *testing.T, n, max int, be func(string) mcpbridge.Backend) (hs []*Handler, bases []string, lb string) {
	t.Helper()
	return newInstancesWith(t, n, Options{MaxSessions: max, Backend: be})
}

// newInstancesWith is newInstances with o's other options.
func newInstancesWith(t *testing.T, n int, o Options) (hs []*Handler, bases []string, lb string) {
	t.Helper()
	if o.Backend == nil {
		o.Backend = func(string) mcpbridge.Backend { return noServer{} }
	}
	o.SessionKey = sharedKey
	o.TokenOf = func(r *http.Request) string { return r.URL.Query().Get("t") }
	for range n {
		h := New(o)
		ts := httptest.NewServer(h)
		t.Cleanup(func() {
			h.Close()
			ts.Close()
		})
		hs, bases = append(hs, h), append(bases, ts.URL)
	}
	var next atomic.Uint64
	rr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs[(next.Add(1)-1)%uint64(n)].ServeHTTP(w, r)
	}))
	t.Cleanup(rr.Close)
	return hs, bases, rr.URL
}

// TestSessionServedByEveryInstance: a session made on one instance is
// served by the others, one request on each in turn, as behind a
// round-robin balancer; each instance holds it in its table.
func TestSessionServedByEveryInstance(t *testing.T) {
	hs, _, lb := newInstances(t, 3, 4, nil)
	c := dial(t, lb, "token-a", "") // initialize on the first, initialized on the second
	if !strings.HasPrefix(c.GetSessionId(), signedPrefix) {
		t.Fatalf("session ID %q is not signed", c.GetSessionId())
	}
	for i := range 6 {
		res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		if len(res.Tools) == 0 {
			t.Fatalf("tools/list %d: no tools", i)
		}
	}
	for i, h := range hs {
		if _, ss := h.state(); ss["token-a"] != 1 {
			t.Errorf("instance %d holds %v sessions", i, ss)
		}
		b := h.bridgeOf("token-a", DefaultRelaySession)
		if b == nil || b.mcp.SendNotificationToSpecificClient(c.GetSessionId(), "notifications/message", map[string]any{}) != nil {
			t.Errorf("instance %d: the MCP server does not know the session", i)
		}
	}
}

// formBackend answers a question with the answer its form (elicitation)
// put in, and records what it was asked.
type formBackend struct {
	noServer
	mu      sync.Mutex
	asked   *pb.AskQuestionRequest
	replied chan *pb.AskQuestionResponse
}

func (f *formBackend) TakeMissedAnswers(context.Context, *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return &pb.TakeMissedAnswersResponse{}, nil
}

func (f *formBackend) AskQuestion(ctx context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	f.mu.Lock()
	f.asked = req
	f.mu.Unlock()
	select {
	case r := <-f.replied:
		return r, "", nil
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

func (f *formBackend) AskQuestionReply(_ context.Context, req *pb.AskQuestionReplyRequest) error {
	f.replied <- req.GetResponse()
	return nil
}

type acceptForm struct{ seen chan string }

func (a acceptForm) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.seen <- req.Params.Message
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"answer": "from the form"}}}, nil
}

// TestAdoptedSessionKeepsItsInitialize: an instance that takes over a
// session knows what its client's initialize said where it began: its
// name goes with the question, and its form is offered (elicitation).
func TestAdoptedSessionKeepsItsInitialize(t *testing.T) {
	be := &formBackend{replied: make(chan *pb.AskQuestionResponse, 1)}
	_, bases, _ := newInstances(t, 2, 4, func(string) mcpbridge.Backend { return be })
	tr0, err := transport.NewStreamableHTTP(bases[0] + "?t=token-a")
	if err != nil {
		t.Fatal(err)
	}
	c0 := client.NewClient(tr0, client.WithElicitationHandler(acceptForm{}))
	if err := c0.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "agent-x", Version: "1"}
	if _, err := c0.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	sid := c0.GetSessionId()

	// The same session, its requests now on the other instance.
	tr1, err := transport.NewStreamableHTTP(bases[1]+"?t=token-a", transport.WithSession(sid))
	if err != nil {
		t.Fatal(err)
	}
	form := acceptForm{seen: make(chan string, 1)}
	c1 := client.NewClient(tr1, client.WithSession(), client.WithElicitationHandler(form))
	if err := c1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "ask_question"
	req.Params.Arguments = map[string]any{"question": "Which database?"}
	res, err := c1.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultTexts(res); got != "from the form" {
		t.Errorf("result = %q", got)
	}
	if msg := <-form.seen; !strings.Contains(msg, "Which database?") {
		t.Errorf("form = %q", msg)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.asked.GetRequest().GetMcpClientName() != "agent-x" {
		t.Errorf("client name with the question = %q", be.asked.GetRequest().GetMcpClientName())
	}
}

func resultTexts(r *mcp.CallToolResult) string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// post sends one tools/list of session sid to base as token and gives
// the status.
func post(t *testing.T, base, token, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"&t="+token, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSessionIDsRefused: an instance adopts only an ID signed with the
// cluster's key for the token presented and its relay session, and not
// one its client ended there.
func TestSessionIDsRefused(t *testing.T) {
	_, bases, _ := newInstances(t, 2, 4, nil)
	good := sign(deriveKey(sharedKey, sessionIDLabel), "token-a", claims{Relay: DefaultRelaySession, Version: "2025-11-25", Nonce: "n"})
	if got := post(t, bases[1]+"?", "token-a", good); got != http.StatusOK {
		t.Fatalf("a valid ID: %d", got)
	}
	payload, sig, _ := strings.Cut(strings.TrimPrefix(good, signedPrefix), ".")
	tampered := []byte(payload)
	tampered[len(tampered)/2] ^= 1
	other := sign([]byte("another key, not the cluster's.."), "token-a", claims{Relay: DefaultRelaySession, Nonce: "n"})
	for name, tc := range map[string]struct{ token, query, sid string }{
		"random":         {"token-a", "?", "mcp-session-" + strings.Repeat("A", 26)},
		"forged":         {"token-a", "?", other},
		"tampered":       {"token-a", "?", signedPrefix + string(tampered) + "." + sig},
		"no signature":   {"token-a", "?", signedPrefix + payload},
		"other room":     {"token-b", "?", good},
		"other relay":    {"token-a", "?session=other", good},
		"over the limit": {"token-a", "?", good + strings.Repeat("A", maxSignedID)},
	} {
		if got := post(t, bases[0]+tc.query, tc.token, tc.sid); got != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", name, got)
		}
	}

	// Ended by its client (DELETE) where it lands: not adopted there again.
	req, _ := http.NewRequest(http.MethodDelete, bases[1]+"?t=token-a", nil)
	req.Header.Set("Mcp-Session-Id", good)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := post(t, bases[1]+"?", "token-a", good); got != http.StatusNotFound {
		t.Errorf("after DELETE: %d, want 404", got)
	}
}

// TestAdoptedSessionsBounded: adopted sessions take their places in the
// table as new ones do: one unused the longest makes way, and none is
// taken in while every one is busy.
func TestAdoptedSessionsBounded(t *testing.T) {
	hs, bases, _ := newInstances(t, 1, 2, nil)
	key := deriveKey(sharedKey, sessionIDLabel)
	sid := func(n string) string {
		return sign(key, "token-a", claims{Relay: DefaultRelaySession, Version: "2025-11-25", Nonce: n})
	}
	for _, n := range []string{"1", "2", "3"} {
		if got := post(t, bases[0]+"?", "token-a", sid(n)); got != http.StatusOK {
			t.Fatalf("adopt %s: %d", n, got)
		}
	}
	if _, ss := hs[0].state(); ss["token-a"] != 2 {
		t.Fatalf("sessions %v, want 2", ss)
	}
	b := hs[0].bridgeOf("token-a", DefaultRelaySession)
	if b.mcp.SendNotificationToSpecificClient(sid("1"), "notifications/message", map[string]any{}) == nil {
		t.Error("the session that made way is still known to the MCP server")
	}

	// Both in the table busy: a third is refused.
	for _, n := range []string{"2", "3"} {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, bases[0]+"?t=token-a", pr)
		req.Header.Set("Mcp-Session-Id", sid(n))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		t.Cleanup(func() {
			pw.Close()
			<-done
		})
		if _, err := pw.Write([]byte(`{"jsonrpc":"2.0",`)); err != nil {
			t.Fatal(err)
		}
		hs[0].waitRequests(sid(n), 1)
	}
	if got := post(t, bases[0]+"?", "token-a", sid("4")); got != http.StatusServiceUnavailable {
		t.Errorf("a session adopted while all are busy: %d, want 503", got)
	}
}

// TestAdoptedByItsStream: the standalone stream (GET) the official SDK
// opens after initialize may be what reaches another instance first, at
// the same time as a request: the session is taken over once, and both
// are served.
func TestAdoptedByItsStream(t *testing.T) {
	hs, bases, _ := newInstances(t, 2, 4, nil)
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	tr, err := transport.NewStreamableHTTP(bases[1]+"?t=token-a", transport.WithSession(sid))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithSession())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	listed := make(chan error, 1)
	go func() {
		_, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		listed <- err
	}()
	listen(t, bases[1], "token-a", sid)
	if err := <-listed; err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	hs[1].waitRequests(sid, 1) // the stream
	if _, ss := hs[1].state(); ss["token-a"] != 1 {
		t.Errorf("sessions %v, want 1", ss)
	}
	b := hs[1].bridgeOf("token-a", DefaultRelaySession)
	if b == nil || b.mcp.SendNotificationToSpecificClient(sid, "notifications/message", map[string]any{}) != nil {
		t.Error("the MCP server does not know the session")
	}
}
