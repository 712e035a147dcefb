package ingress_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/ingress"
)

// fakeOrchestrator serves invoke as POST /internal/invoke on a real
// socket and answers the other calls 200.
func fakeOrchestrator(t *testing.T, invoke func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client going
		if r.URL.Path == "/internal/invoke" {
			invoke(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// withFake serves the server with an HTTPOrchestrator reaching url.
func withFake(t *testing.T, url string, o ingress.Options, ho ingress.HTTPOptions) *env {
	t.Helper()
	ho.URL = url
	orch, err := ingress.NewHTTPOrchestrator(ho)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(orch.CloseIdle)
	o.Orchestrator = orch
	return newEnv(t, false, o, ingress.HTTPOptions{})
}

// silent answers the headers of an event stream, then nothing until the
// request ends; it reports both on gone.
func silent(gone chan<- string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if gone != nil {
			gone <- "arrived"
		}
		<-r.Context().Done()
		if gone != nil {
			gone <- "gone"
		}
	}
}

// TestSilentOrchestrator: an orchestrator that answers the headers and
// then names no run ends the invoke with orchestrator_error within its
// timeout; such invokes do not pile up as open runs.
func TestSilentOrchestrator(t *testing.T) {
	e := withFake(t, fakeOrchestrator(t, silent(nil)), ingress.Options{}, ingress.HTTPOptions{Timeout: 300 * time.Millisecond, Retries: -1})
	c := dial(t, e.url)
	helloAppendix(t, c)
	for i := range 10 { // more than MaxRuns (8)
		c.send(strings.Replace(appendix(invokeA, c.sess, ""), "req_001", fmt.Sprintf("req_%d", i), 1))
		er := c.expectError("orchestrator_error")
		if str(er, "request_id") != fmt.Sprintf("req_%d", i) || !strings.Contains(str(er, "message"), "no event") {
			t.Fatalf("invoke %d: %v", i, er)
		}
	}
}

// TestCancelBeforeStart: cancel_run naming the agent_invoke's request_id
// cancels a run whose orchestrator has not named it yet: the client is
// told (state CANCELLED with its request_id), the orchestrator's request
// ends, and the run no longer counts.
func TestCancelBeforeStart(t *testing.T) {
	gone := make(chan string, 2)
	e := withFake(t, fakeOrchestrator(t, silent(gone)), ingress.Options{}, ingress.HTTPOptions{Timeout: time.Minute})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(invokeA, c.sess, ""))
	select {
	case <-gone: // arrived
	case <-time.After(10 * time.Second):
		t.Fatal("the invoke did not reach the orchestrator")
	}
	c.send(`{"type":"cancel_run","ts":1,"request_id":"req_001"}`)
	st := c.expect("state")
	if str(st, "state") != "CANCELLED" || str(st, "request_id") != "req_001" {
		t.Fatalf("state %v", st)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the orchestrator's request was not ended")
	}
	c.send(`{"type":"cancel_run","ts":1,"request_id":"req_001"}`)
	c.expectError("invalid_message")
}

// TestHugeEvent: an event over the limit (1 MiB) ends the run with
// orchestrator_error saying so, not the parser's words.
func TestHugeEvent(t *testing.T) {
	url := fakeOrchestrator(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "data: {\"type\":\"run_started\",\"run_id\":\"run_big\"}\n\n")
		fmt.Fprintf(w, "data: {\"type\":\"delta\",\"run_id\":\"run_big\",\"text\":\"%s\"}\n\n", strings.Repeat("x", 3<<19))
	})
	e := withFake(t, url, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(invokeA, c.sess, ""))
	run := str(c.expect("run_started"), "run_id")
	er := c.expectError("orchestrator_error")
	if msg := str(er, "message"); str(er, "run_id") != run || !strings.Contains(msg, "larger than 1048576 bytes") || strings.Contains(msg, "bufio") {
		t.Fatalf("error %v", er)
	}
}

// streaming answers each invoke with run_started, n deltas of size
// bytes each, and done.
func streaming(n, size int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		run := fmt.Sprintf("run_%p", r)
		fmt.Fprintf(w, "data: {\"type\":\"run_started\",\"run_id\":%q}\n\n", run)
		text := strings.Repeat("x", size)
		for range n {
			fmt.Fprintf(w, "data: {\"type\":\"delta\",\"run_id\":%q,\"text\":%q}\n\n", run, text)
		}
		fmt.Fprintf(w, "data: {\"type\":\"done\",\"run_id\":%q,\"usage\":{}}\n\n", run)
	}
}

// healthOf reads /health.
func healthOf(t *testing.T, base string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/health?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReplayBytesBounded: the replay window holds at most ReplayBytes
// per session and ReplayTotalBytes in all, whatever the events' sizes,
// the oldest dropped first; a device that reconnects past what was
// dropped is told (gap) and gets what is kept, in order.
func TestReplayBytesBounded(t *testing.T) {
	const size = 256 << 10
	e := withFake(t, fakeOrchestrator(t, streaming(20, size)),
		ingress.Options{ReplayBytes: 1 << 20, ReplayTotalBytes: 2 << 20}, ingress.HTTPOptions{})
	var first *client
	for i := range 3 {
		c := dial(t, e.url)
		c.hello(fmt.Sprintf("u%d", i), "")
		c.send(appendix(invokeA, c.sess, ""))
		c.expect("run_started")
		for range 20 {
			c.expect("delta")
		}
		c.expect("done")
		if held := healthOf(t, e.url)["ingressReplayBytes"].(float64); held > 2<<20 {
			t.Fatalf("after session %d the replay windows hold %.0f bytes, over the total of %d", i, held, 2<<20)
		}
		if i == 0 {
			first = c
		}
	}
	if held := healthOf(t, e.url)["ingressReplayBytes"].(float64); held <= 0 {
		t.Fatalf("the replay windows hold %.0f bytes", held)
	}
	// The first session's device comes back with nothing: told of the gap,
	// it gets at most 1 MiB, the newest, in order.
	again := dial(t, e.url)
	again.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u0","api_key":%q,"session_id":%q,"last_seq":0}`, tok, first.sess))
	ack := again.expect("hello_ack")
	if ack["gap"] != true {
		t.Fatalf("hello_ack %v: no gap", ack)
	}
	n, _ := ack["replayed"].(json.Number).Int64()
	if n == 0 || n*size > 1<<20 {
		t.Fatalf("%d events replayed, over 1 MiB", n)
	}
	var last int64
	for range n {
		ev := again.next()
		seq, _ := ev["seq"].(json.Number).Int64()
		if last != 0 && seq != last+1 {
			t.Fatalf("replayed seq %d after %d", seq, last)
		}
		last = seq
	}
	if want, _ := ack["last_seq"].(json.Number).Int64(); n > 0 && last != want {
		t.Fatalf("replay ended at %d, the session's last is %d", last, want)
	}
}

// TestBeforeHelloAndFrames: before hello anything but hello is answered
// "send hello first", whatever its fields; a binary frame is refused
// (the protocol is text); error texts name the field, not Go's types.
func TestBeforeHelloAndFrames(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	for _, m := range []string{`{"type":"agent_invoke","message":{"content":""}}`, `{"type":"tool_result"}`, `{"type":"cancel_run","ts":"x"}`, `{"type":"nope"}`} {
		c.send(m)
		if er := c.expectError("invalid_message"); !strings.Contains(str(er, "message"), "send hello first") {
			t.Errorf("%s before hello: %v", m, er)
		}
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"hello","ts":1,"user_id":"u1","api_key":"`+tok+`"}`)); err != nil {
		t.Fatal(err)
	}
	if er := c.expectError("invalid_message"); !strings.Contains(str(er, "message"), "text") {
		t.Errorf("a binary hello: %v", er)
	}
	c.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tok + `","client_meta":{"tools":"x"}}`)
	er := c.expectError("invalid_message")
	c.hello("u1", "")
	c.send(`{"type":"agent_invoke","ts":"x","message":{"content":"hi"}}`)
	er2 := c.expectError("invalid_message")
	c.send(`{"type":"cancel_run",`)
	er3 := c.expectError("invalid_message")
	for _, er := range []map[string]any{er, er2, er3} {
		if msg := str(er, "message"); strings.Contains(msg, "Go ") || strings.Contains(msg, "json:") || strings.Contains(msg, "int64") || strings.Contains(msg, "ingress.") {
			t.Errorf("error text with Go internals: %q", msg)
		}
	}
	if !strings.Contains(str(er2, "message"), "ts") {
		t.Errorf("the error does not name the field: %v", er2)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"cancel_run","ts":1,"run_id":"r"}`)); err != nil {
		t.Fatal(err)
	}
	c.expectError("invalid_message")
}

// TestLastSeqAndQuotas: a last_seq beyond the session's is an error, not
// a silent ack; the caps on sessions and devices answer invalid_message
// (seed 003 has no code of its own for a quota), not internal_error.
func TestLastSeqAndQuotas(t *testing.T) {
	e := newEnv(t, false, ingress.Options{MaxSessions: 1, MaxDevices: 1}, ingress.HTTPOptions{})
	a := dial(t, e.url)
	a.hello("u1", "")
	b := dial(t, e.url)
	b.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u1","api_key":%q,"session_id":%q,"last_seq":0}`, tok, a.sess))
	if er := b.expectError("invalid_message"); !strings.Contains(str(er, "message"), "devices") {
		t.Errorf("a device over the cap: %v", er)
	}
	b.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u2","api_key":%q}`, tok))
	if er := b.expectError("invalid_message"); !strings.Contains(str(er, "message"), "sessions") {
		t.Errorf("a session over the cap: %v", er)
	}
	a.ws.Close()
	for {
		b.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u1","api_key":%q,"session_id":%q,"last_seq":99}`, tok, a.sess))
		er := b.expect("error")
		if str(er, "code") == "invalid_message" && strings.Contains(str(er, "message"), "last_seq") {
			break
		}
		if !strings.Contains(str(er, "message"), "devices") { // a's leaving not seen yet
			t.Fatalf("last_seq beyond the session's: %v", er)
		}
	}
	b.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":"u1","api_key":%q,"session_id":%q,"last_seq":0}`, tok, a.sess))
	b.expect("hello_ack")
}
