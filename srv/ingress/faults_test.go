package ingress_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/ingress"
)

// TestOrchestratorDown: a run whose orchestrator cannot be reached ends
// with orchestrator_error naming its request, after the retries; the
// connection and the session go on.
func TestOrchestratorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{URL: dead, Backoff: time.Millisecond})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(invokeA, c.sess, ""))
	if er := c.expectError("orchestrator_error"); str(er, "request_id") != "req_001" {
		t.Fatalf("error %v", er)
	}
	c.send(appendix(invokeA, c.sess, ""))
	c.expectError("orchestrator_error") // still served
}

// TestStreamCut: an SSE stream cut in the middle of a run ends it with
// orchestrator_error, after what had arrived; no goroutine is left
// reading it (the server's Close waits for them, and -race runs it).
func TestStreamCut(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "cut", 1), c.sess, ""))
	run := str(c.expect("run_started"), "run_id")
	if d := c.expect("delta"); str(d, "text") != "部分" {
		t.Fatalf("delta %v", d)
	}
	if er := c.expectError("orchestrator_error"); str(er, "run_id") != run {
		t.Fatalf("error %v", er)
	}
	c.send(appendix(invokeA, c.sess, ""))
	c.expect("run_started")
}

// TestSlowOrchestrator: an orchestrator that does not answer within the
// timeout ends the run with orchestrator_error.
func TestSlowOrchestrator(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{Timeout: 200 * time.Millisecond, Retries: -1})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "slow", 1), c.sess, ""))
	if er := c.expectError("orchestrator_error"); str(er, "request_id") != "req_001" {
		t.Fatalf("error %v", er)
	}
}

// TestApprovalInInbox: an approval is also a question in the token's
// inbox; the person's answer there decides it (the client is told by
// the state event, and its late decision is refused).
func TestApprovalInInbox(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	phone, err := wstest.Dial(e.url, tok, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer phone.Close()
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "transfer money", 1), c.sess, ""))
	c.expect("run_started")
	c.expect("approval_required")
	q, err := phone.Expect("AskQuestion", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	text := q.GetAskQuestionRequest().GetRequest().GetQuestion()
	if !strings.Contains(text, "payments.transfer") || !strings.Contains(text, "转账 ¥100 到账户 xxx") {
		t.Fatalf("the inbox shows %q", text)
	}
	if err := phone.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "approve, 我确认过了")); err != nil {
		t.Fatal(err)
	}
	st := c.expect("state")
	if d, _ := st["detail"].(map[string]any); str(st, "state") != "RUNNING" || d["decided_by"] != "inbox" {
		t.Fatalf("state %v", st)
	}
	c.expect("delta")
	c.expect("done")
	c.send(appendix(decideA, c.sess, "run_001"))
	c.expectError("invalid_message")
}

// TestApprovalTwiceAtOnce: the client and the person answer the same
// approval at once; exactly one decision reaches the orchestrator, and
// the state event says whose.
func TestApprovalTwiceAtOnce(t *testing.T) {
	for i := range 5 {
		e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
		phone, err := wstest.Dial(e.url, tok, "phone", nil)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, e.url)
		helloAppendix(t, c)
		c.send(appendix(strings.Replace(invokeA, "你好", "transfer money", 1), c.sess, ""))
		c.expect("run_started")
		c.expect("approval_required")
		q, err := phone.Expect("AskQuestion", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { c.send(appendix(decideA, c.sess, "run_001")) })
		wg.Go(func() { _ = phone.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "reject: not now")) })
		wg.Wait()
		// The state event, and the refusal of the decision that came
		// second, in either order.
		var st map[string]any
		codes := map[string]bool{}
		for st == nil {
			ev := c.next()
			switch str(ev, "type") {
			case "state":
				st = ev
			case "error":
				codes[str(ev, "code")] = true
			default:
				t.Fatalf("round %d: %v before the state", i, ev)
			}
		}
		d, _ := st["detail"].(map[string]any)
		by := d["decided_by"]
		switch {
		case by == "client" && str(st, "state") == "RUNNING":
			c.expect("delta")
			c.expect("done")
		case by == "inbox" && str(st, "state") == "REJECTED":
			for len(codes) < 2 {
				codes[str(c.expect("error"), "code")] = true
			}
			if !codes["invalid_message"] || !codes["orchestrator_error"] {
				t.Fatalf("round %d: errors %v", i, codes)
			}
		default:
			t.Fatalf("round %d: state %v", i, st)
		}
		if dec := e.callsTo(t, 2, "/internal/approvals/"); len(dec) != 1 {
			t.Fatalf("round %d: %d decisions reached the orchestrator", i, len(dec))
		}
		phone.Close()
	}
}

// TestGuards: a page of another site may not open /ingress/ws; a
// connection that never says hello is closed; one token cannot join
// another's session; bad input is answered and the connection goes on.
func TestGuards(t *testing.T) {
	e := newEnv(t, false, ingress.Options{HelloTimeout: 100 * time.Millisecond}, ingress.HTTPOptions{})
	h := http.Header{"Origin": {"http://evil.example"}}
	if _, resp, err := websocket.DefaultDialer.Dial(strings.Replace(e.url, "http", "ws", 1)+"/ingress/ws", h); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign origin: %v %v", resp, err)
	}
	quiet := dial(t, e.url)
	if err := quiet.closed(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("no hello: %v", err)
	}
	a := dial(t, e.url)
	a.hello("u1", "")
	b := dial(t, e.url)
	b.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tokB + `","session_id":"` + a.sess + `"}`)
	b.expectError("session_not_found")
	for _, bad := range []string{`[1,2]`, `{"type":"agent_invoke","message":{"content":""}}`, `{"type":"tool_result"}`,
		`{"type":"approval_decision","approval_id":"x","decision":"maybe"}`, `{"type":"nope"}`, "\xff", `{"type":"agent_invoke","ts":"x"}`} {
		a.send(bad)
		a.expectError("invalid_message")
	}
	a.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tok + `"}`)
	a.expectError("invalid_message")
}
