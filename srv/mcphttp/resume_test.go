package mcphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// asker is a backend whose questions wait until the test answers them.
// Asking again with the ID of a question re-attaches to it, and gets the
// answer given meanwhile, as the server's hub does.
type asker struct {
	noServer
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	waiting map[string]int
	answers map[string]string
	ids     []string
	asked   map[string]*pb.McpAskQuestionRequest
}

func newAsker() *asker {
	return &asker{changed: make(chan struct{}), waiting: map[string]int{}, answers: map[string]string{}, asked: map[string]*pb.McpAskQuestionRequest{}}
}

func (a *asker) bump() {
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *asker) AskQuestion(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	id := r.GetID()
	a.mu.Lock()
	if r.GetRequest() != nil {
		a.asked[id] = r.GetRequest()
	}
	a.mu.Unlock()
	for {
		a.mu.Lock()
		if ans, ok := a.answers[id]; ok {
			a.mu.Unlock()
			return &pb.AskQuestionResponse{ID: id, Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: ans}}}}, "test", nil
		}
		if a.waiting[id] == 0 && !contains(a.ids, id) {
			a.ids = append(a.ids, id)
		}
		a.waiting[id]++
		a.bump()
		ch := a.changed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		a.mu.Lock()
		a.waiting[id]--
		a.bump()
		a.mu.Unlock()
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
	}
}

// Reattach re-attaches by ID to a question asked, when sum is its digest,
// as the server's hub does for a call resumed through another instance.
func (a *asker) Reattach(ctx context.Context, kind wire.Kind, id string, sum [32]byte) (*pb.AskQuestionResponse, []*pb.Question, string, error) {
	a.mu.Lock()
	q := a.asked[id]
	a.mu.Unlock()
	if q == nil || kind != wire.AskQuestion || wire.Digest(kind, q.GetProjectDirectory(), q.GetQuestion()) != sum {
		return nil, nil, "", connect.NewError(connect.CodeNotFound, errors.New("no such request"))
	}
	resp, by, err := a.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id})
	return resp, q.GetQuestions(), by, err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// await waits until cond holds of the asker's state.
func (a *asker) await(cond func() bool) {
	for {
		a.mu.Lock()
		ok, ch := cond(), a.changed
		a.mu.Unlock()
		if ok {
			return
		}
		<-ch
	}
}

// answer answers the n-th question asked.
func (a *asker) answer(n int, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers[a.ids[n]] = text
	a.bump()
}

// cutter is an HTTP client whose connections the test can cut.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	*http.Client
}

func newCutter() *cutter {
	c := &cutter{}
	var d net.Dialer
	c.Client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}}}
	return c
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

type sse struct{ id, data string }

// next reads the next event of an SSE stream.
func next(r *bufio.Reader) (sse, error) {
	var ev sse
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
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

func newResumeEndpoint(t *testing.T, be mcpbridge.Backend, o Options) (*Handler, string) {
	t.Helper()
	o.Backend = func(string) mcpbridge.Backend { return be }
	o.TokenOf = func(r *http.Request) string { return r.URL.Query().Get("t") }
	h := New(o)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		ts.Close()
	})
	return h, ts.URL
}

func mcpRequest(t *testing.T, method, url, sid, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	return req
}

const askBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Deploy now?","project_directory":"/p"},"_meta":{"progressToken":"p7"}}}`

// askAndCut asks over a connection it then cuts, once the question is
// with the person; it returns the ID of the last event the client had.
func askAndCut(t *testing.T, be *asker, base, sid string) string {
	return askAndCutSigned(t, be, base, sid, false)
}

// askAndCutSigned is askAndCut, which, when signed, reads on until an
// event whose ID carries the call's request: sent once the call asks
// (before the question is with the person), after the stream's first
// event or as it.
func askAndCutSigned(t *testing.T, be *asker, base, sid string, signed bool) string {
	t.Helper()
	c := newCutter()
	resp, err := c.Do(mcpRequest(t, http.MethodPost, base+"?t=token-a", sid, askBody))
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("a call's response is %q, not a stream", ct)
	}
	br := bufio.NewReader(resp.Body)
	ev, err := next(br)
	if err != nil {
		t.Fatal(err)
	}
	if ev.id == "" {
		t.Fatalf("the stream's first event has no id (%q): a client cannot resume it", ev.data)
	}
	be.await(func() bool { return len(be.ids) >= 1 && be.waiting[be.ids[len(be.ids)-1]] > 0 })
	for signed && !strings.Contains(ev.id, ".") {
		if ev, err = next(br); err != nil {
			t.Fatalf("no event ID carries the call's request: %v", err)
		}
	}
	c.cut()
	return ev.id
}

// resume resumes a stream after lastID and reads it until the response
// to the call (id 7).
func resume(t *testing.T, base, sid, lastID string) string {
	t.Helper()
	req := mcpRequest(t, http.MethodGet, base+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resume: %d %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	for {
		ev, err := next(r)
		if err != nil {
			t.Fatalf("the resumed stream ended without the call's response: %v", err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result *struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if ev.data == "" || json.Unmarshal([]byte(ev.data), &m) != nil || string(m.ID) != "7" || m.Result == nil {
			continue
		}
		var text []string
		for _, c := range m.Result.Content {
			text = append(text, c.Text)
		}
		return strings.Join(text, "\n")
	}
}

// TestResumeACutCall: a call whose stream is cut while the question is
// with the person goes on; the person answers while no connection is
// there; the client resumes the stream (GET, Last-Event-ID) and gets the
// answer as the call's response.
func TestResumeACutCall(t *testing.T) {
	be := newAsker()
	_, base := newResumeEndpoint(t, be, Options{Bridge: mcpbridge.Options{ProgressInterval: 20 * time.Millisecond}})
	sid := dial(t, base, "token-a", "").GetSessionId()
	last := askAndCut(t, be, base, sid)
	// The call stops waiting on the server while no one hears it, so an
	// answer is never taken by a call whose client is gone.
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })
	be.answer(0, "yes, deploy")
	if got := resume(t, base, sid, last); !strings.Contains(got, "yes, deploy") {
		t.Errorf("the resumed call's response: %q", got)
	}
}

// TestResumeRefusals: a resume is guarded as every request of the
// session: another token's request does not find the session (404); an
// event ID of another session, one never given, one no longer kept or
// one that is no ID of ours replays nothing (400, saying why), and the
// call goes on, resumable by its own client.
func TestResumeRefusals(t *testing.T) {
	be := newAsker()
	_, base := newResumeEndpoint(t, be, Options{Bridge: mcpbridge.Options{ProgressInterval: time.Hour}})
	sid := dial(t, base, "token-a", "").GetSessionId()
	other := dial(t, base, "token-a", "").GetSessionId()
	last := askAndCut(t, be, base, sid)
	tag, n, _, err := parseEventID(last)
	if err != nil {
		t.Fatal(err)
	}
	otherTag := "zz" + tag[2:]
	for _, tc := range []struct {
		name, token, sid, id string
		want                 int
		says                 string
	}{
		{"another token", "token-b", sid, last, http.StatusNotFound, "unknown MCP session"},
		{"another session", "token-a", other, last, http.StatusBadRequest, "not an event of this MCP session"},
		{"another session's tag", "token-a", sid, otherTag + "-1", http.StatusBadRequest, "not an event of this MCP session"},
		{"never given", "token-a", sid, fmt.Sprintf("%s-%d", tag, n+1000), http.StatusBadRequest, "not an event of this MCP session"},
		{"not ours", "token-a", sid, "42", http.StatusBadRequest, "not an event ID this server gives"},
		{"too long", "token-a", sid, tag + "-" + strings.Repeat("1", 100), http.StatusBadRequest, "not an event ID this server gives"},
		{"zero", "token-a", sid, tag + "-0", http.StatusBadRequest, "not an event ID this server gives"},
	} {
		req := mcpRequest(t, http.MethodGet, base+"?t="+tc.token, tc.sid, "")
		req.Header.Set("Last-Event-ID", tc.id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body) // a refusal ends: its body is whole
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.want, tc.says)
		}
	}
	be.answer(0, "go ahead")
	if got := resume(t, base, sid, last); !strings.Contains(got, "go ahead") {
		t.Errorf("the call after the refused resumes: %q", got)
	}
}

// TestCallWithoutEventStream: a client whose Accept names no
// text/event-stream gets its call's response as JSON, as before: only a
// stream can be resumed, and it did not ask for one. A call answered at
// once (within primeAfter) is answered as JSON too: there is nothing to
// resume; one that waits becomes a stream (TestResumeACutCall).
func TestCallWithoutEventStream(t *testing.T) {
	_, base := newResumeEndpoint(t, newAsker(), Options{})
	sid := dial(t, base, "token-a", "").GetSessionId()
	for _, tc := range []struct{ accept, want string }{
		{"application/json", "application/json"},
		{"application/json, text/event-stream", "application/json"},
	} {
		req := mcpRequest(t, http.MethodPost, base+"?t=token-a", sid,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_ui_state","arguments":{}}}`)
		req.Header.Set("Accept", tc.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.want) || !strings.Contains(string(body), `"id":3`) {
			t.Errorf("Accept %q: %d %q %s", tc.accept, resp.StatusCode, ct, body)
		}
	}
}

// TestCallAsNotification: a tools/call without an id is a notification:
// 202 and no body, not a stream with a made-up error.
func TestCallAsNotification(t *testing.T) {
	_, base := newResumeEndpoint(t, newAsker(), Options{})
	sid := dial(t, base, "token-a", "").GetSessionId()
	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+"?t=token-a", sid,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_ui_state","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(body) != 0 {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}
