// Package ingresstest is an orchestrator written from seed 003's HTTP
// contract alone, for tests of the Ingress endpoint: POST
// /internal/invoke answers Server-Sent Events; tool requests and
// approvals are pushed through the server's POST /internal/send; POST
// /internal/tool_calls/:id/submit, /internal/approvals/:id/decide and
// /internal/runs/:id/cancel answer them. What a run does is chosen by
// the words of its message (see Orchestrator.invoke). Every call it gets
// is journaled; GET /debug/calls?min=N returns the journal once it holds
// N calls.
//
// Serve runs it in a process of its own (a test binary re-executed).
package ingresstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// Call is one call the orchestrator got.
type Call struct {
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

// Orchestrator is the test double. Ingress and Token say where to push
// (POST /internal/send).
type Orchestrator struct {
	Ingress, Token string

	mu      sync.Mutex
	calls   []Call
	changed chan struct{}
	runs    int
	answers map[string]chan json.RawMessage // tool call or approval id → its submit/decide body
	cancels map[string]chan struct{}        // run id → closed on cancel
	hc      *http.Client
}

// New returns the double.
func New(ingressURL, token string) *Orchestrator {
	return &Orchestrator{Ingress: ingressURL, Token: token, changed: make(chan struct{}),
		answers: map[string]chan json.RawMessage{}, cancels: map[string]chan struct{}{}, hc: &http.Client{Timeout: 10 * time.Second}}
}

func (o *Orchestrator) record(path string, body []byte) {
	if !json.Valid(body) {
		body, _ = json.Marshal(string(body))
	}
	o.mu.Lock()
	o.calls = append(o.calls, Call{Path: path, Body: body})
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

func (o *Orchestrator) answer(id string) chan json.RawMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := o.answers[id]
	if ch == nil {
		ch = make(chan json.RawMessage, 1)
		o.answers[id] = ch
	}
	return ch
}

func (o *Orchestrator) cancelled(run string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := o.cancels[run]
	if ch == nil {
		ch = make(chan struct{})
		o.cancels[run] = ch
	}
	return ch
}

func (o *Orchestrator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method == http.MethodGet && r.URL.Path == "/debug/calls" {
		o.journal(w, r)
		return
	}
	if r.Method != http.MethodPost || len(parts) < 2 || parts[0] != "internal" {
		http.NotFound(w, r)
		return
	}
	o.record(r.URL.Path, body)
	switch {
	case len(parts) == 2 && parts[1] == "invoke":
		o.invoke(w, r, body)
	case len(parts) == 4 && (parts[1] == "tool_calls" && parts[3] == "submit" || parts[1] == "approvals" && parts[3] == "decide"):
		select {
		case o.answer(parts[2]) <- body:
		default: // answered twice: the journal shows it
		}
		writeJSON(w, map[string]any{"ok": true})
	case len(parts) == 4 && parts[1] == "runs" && parts[3] == "cancel":
		ch := o.cancelled(parts[2])
		o.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		o.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true})
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// journal answers GET /debug/calls?min=N once N calls were made (or the
// request ends).
func (o *Orchestrator) journal(w http.ResponseWriter, r *http.Request) {
	want, _ := strconv.Atoi(r.URL.Query().Get("min"))
	for {
		o.mu.Lock()
		calls, ch := append([]Call(nil), o.calls...), o.changed
		o.mu.Unlock()
		if len(calls) >= want {
			writeJSON(w, calls)
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

// stream writes SSE events.
type stream struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func (s *stream) send(ev map[string]any) {
	if _, ok := ev["ts"]; !ok {
		ev["ts"] = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(ev)
	m := &sse.Message{}
	m.AppendData(string(b))
	_, _ = m.WriteTo(s.w)
	s.fl.Flush()
}

// push posts an event to the client through the server's /internal/send.
func (o *Orchestrator) push(session string, ev map[string]any) (int, string) {
	b, _ := json.Marshal(map[string]any{"session_id": session, "event": ev})
	req, _ := http.NewRequest(http.MethodPost, o.Ingress+"/internal/send", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+o.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// invoke runs one agent run. Its message's words choose what it does:
//
//	你好            Appendix A: three deltas, then done with usage
//	screenshot      a tool_request (tc_NNN, browser.screenshot) through /internal/send,
//	                deadline 60s; "screenshot late" gives a deadline already past;
//	                the result's words stream back, then done
//	transfer        an approval_required (ap_NNN, payments.transfer); approved: a
//	                delta and done; rejected: error "rejected: <reason>"
//	long            a delta, then it waits for its cancel and ends without done
//	cut             a delta, then the connection is cut
//	slow            no answer at all until the request ends
//	stream N [pace µs]
//	                N deltas (at most 1,000,000), each one's text the time it was
//	                sent (Unix nanoseconds), pace µs apart or as fast as it can, then
//	                done: what the benchmark streams
func (o *Orchestrator) invoke(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct {
		RequestID string `json:"request_id"`
		SessionID string `json:"session_id"`
		AgentID   string `json:"agent_id"`
		Message   struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.SessionID == "" {
		http.Error(w, "bad invoke", http.StatusBadRequest)
		return
	}
	words := req.Message.Content
	if strings.Contains(words, "slow") {
		<-r.Context().Done()
		return
	}
	o.mu.Lock()
	o.runs++
	n := o.runs
	o.mu.Unlock()
	run := fmt.Sprintf("run_%03d", n)
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, fl: fl}
	s.send(map[string]any{"type": "run_started", "run_id": run, "request_id": req.RequestID, "agent_id": req.AgentID})
	ctx := r.Context()
	switch {
	case strings.HasPrefix(words, "stream "):
		o.stream(ctx, s, run, words)
	case strings.Contains(words, "你好"):
		for _, t := range []string{"你好", "！有什么", "可以帮你的？"} {
			s.send(map[string]any{"type": "delta", "run_id": run, "text": t})
		}
		s.send(map[string]any{"type": "done", "run_id": run, "usage": map[string]any{"total_tokens": 50, "duration_ms": 500}})
	case strings.Contains(words, "screenshot"):
		tc := fmt.Sprintf("tc_%03d", n)
		deadline := time.Now().Add(60 * time.Second)
		if strings.Contains(words, "late") {
			deadline = time.Now().Add(-time.Second)
		}
		code, out := o.push(req.SessionID, map[string]any{"type": "tool_request", "ts": time.Now().UnixMilli(), "run_id": run,
			"tool_call_id": tc, "tool_name": "browser.screenshot", "args": map[string]any{"url": "https://example.com"}, "deadline_ts": deadline.UnixMilli()})
		if code != http.StatusOK {
			s.send(map[string]any{"type": "error", "run_id": run, "code": "client_offline", "message": out})
			return
		}
		var res struct {
			OK     bool            `json:"ok"`
			Result json.RawMessage `json:"result"`
			Error  string          `json:"error"`
		}
		select {
		case b := <-o.answer(tc):
			_ = json.Unmarshal(b, &res)
		case <-ctx.Done():
			return
		}
		if res.OK {
			s.send(map[string]any{"type": "delta", "run_id": run, "text": "截图已完成"})
		} else {
			s.send(map[string]any{"type": "delta", "run_id": run, "text": "截图失败：" + res.Error})
		}
		s.send(map[string]any{"type": "done", "run_id": run, "usage": map[string]any{"total_tokens": 80, "duration_ms": 900}})
	case strings.Contains(words, "transfer"):
		ap := fmt.Sprintf("ap_%03d", n)
		code, out := o.push(req.SessionID, map[string]any{"type": "approval_required", "ts": time.Now().UnixMilli(), "run_id": run,
			"approval_id": ap, "tool_call_id": fmt.Sprintf("tc_%03d", n), "tool_name": "payments.transfer", "args_summary": "转账 ¥100 到账户 xxx"})
		if code != http.StatusOK {
			s.send(map[string]any{"type": "error", "run_id": run, "code": "client_offline", "message": out})
			return
		}
		var d struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		select {
		case b := <-o.answer(ap):
			_ = json.Unmarshal(b, &d)
		case <-ctx.Done():
			return
		}
		if d.Decision != "approve" {
			s.send(map[string]any{"type": "error", "run_id": run, "code": "orchestrator_error", "message": "rejected: " + d.Reason})
			return
		}
		s.send(map[string]any{"type": "delta", "run_id": run, "text": "转账完成"})
		s.send(map[string]any{"type": "done", "run_id": run, "usage": map[string]any{"total_tokens": 60, "duration_ms": 700}})
	case strings.Contains(words, "long"):
		s.send(map[string]any{"type": "delta", "run_id": run, "text": "working"})
		select {
		case <-o.cancelled(run):
		case <-ctx.Done():
		}
	case strings.Contains(words, "cut"):
		s.send(map[string]any{"type": "delta", "run_id": run, "text": "部分"})
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
			}
		}
	default:
		s.send(map[string]any{"type": "error", "run_id": run, "code": "orchestrator_error", "message": "the double does not know what to do with " + strconv.Quote(words)})
	}
}

// stream sends the deltas of "stream N [pace µs]", then done.
func (o *Orchestrator) stream(ctx context.Context, s *stream, run, words string) {
	var n, pace int
	f := strings.Fields(words)
	if len(f) >= 2 {
		n, _ = strconv.Atoi(f[1])
	}
	if len(f) >= 4 && f[2] == "pace" {
		pace, _ = strconv.Atoi(f[3])
	}
	if n < 1 || n > 1_000_000 || pace < 0 {
		s.send(map[string]any{"type": "error", "run_id": run, "code": "orchestrator_error", "message": "stream: N from 1 to 1000000, pace ≥ 0"})
		return
	}
	next := time.Now()
	for range n {
		if pace > 0 {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(time.Duration(pace) * time.Microsecond)
		}
		if ctx.Err() != nil {
			return
		}
		s.send(map[string]any{"type": "delta", "run_id": run, "text": strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	s.send(map[string]any{"type": "done", "run_id": run, "usage": map[string]any{"events": n}})
}

// Serve runs the double on 127.0.0.1 until ctx ends, and writes its base
// URL as one line to out first.
func Serve(ctx context.Context, ingressURL, token string, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: New(ingressURL, token), ReadHeaderTimeout: 10 * time.Second}
	if _, err := fmt.Fprintf(out, "http://%s\n", ln.Addr()); err != nil {
		return fmt.Errorf("write url: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		_ = hs.Close()
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case err := <-errc:
		return err
	}
}

// Main is the double's process: INGRESS_URL and INGRESS_TOKEN name the
// server; it ends when its standard input closes.
func Main() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := Serve(ctx, os.Getenv("INGRESS_URL"), os.Getenv("INGRESS_TOKEN"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ingresstest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
