package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/ingress"
)

// Appendix A's messages, as the seed prints them.
const (
	helloA   = `{"type":"hello","ts":1704067200000,"user_id":"u1","api_key":"sk-xxx"}`
	invokeA  = `{"type":"agent_invoke","ts":1704067200100,"request_id":"req_001","session_id":"sess_001","agent_id":"agent_a","message":{"role":"user","content":"你好"}}`
	resultA  = `{"type":"tool_result","ts":1704067210000,"run_id":"run_001","tool_call_id":"tc_001","ok":true,"result":{"file_path":"/tmp/screenshot.png"}}`
	decideA  = `{"type":"approval_decision","ts":1704067210000,"run_id":"run_001","approval_id":"ap_001","decision":"approve","reason":"已确认转账信息正确"}`
	cancelA  = `{"type":"cancel_run","ts":1704067200000,"run_id":"run_001"}`
	invokeOf = `{"type":"agent_invoke","ts":1704067200100,"request_id":"req_001","session_id":"sess_001","agent_id":"agent_a","message":{"role":"user","content":%q}}`
)

func invokeWith(words string) string {
	b, _ := json.Marshal(words)
	return strings.Replace(invokeOf, "%q", string(b), 1)
}

// helloAppendix says Appendix A's hello.
func helloAppendix(t *testing.T, c *client) {
	t.Helper()
	c.send(appendix(helloA, "", ""))
	ack := c.expect("hello_ack")
	c.sess = str(ack, "session_id")
	if !strings.HasPrefix(c.sess, "sess_") || ack["ts"] == nil {
		t.Fatalf("hello_ack %v", ack)
	}
}

// TestM0Hello: hello → hello_ack with a session id; nothing before hello;
// a wrong api_key gets auth_failed and the connection closes; the
// orchestrator's POST /internal/send reaches the client, and a session
// without devices answers client_offline.
func TestM0Hello(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	c.send(appendix(invokeA, "sess_001", ""))
	c.expectError("invalid_message")
	c.send(`{"type":`)
	c.expectError("invalid_message")
	helloAppendix(t, c)

	bad := dial(t, e.url)
	bad.send(helloA) // sk-xxx is not a token here
	bad.expectError("auth_failed")
	if err := bad.closed(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("after auth_failed: %v, want close 1008", err)
	}

	code, body := post(t, e.url+"/internal/send", tok, `{"session_id":"`+c.sess+`","event":{"type":"state","ts":1704067200000,"state":"IDLE"}}`)
	if code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("/internal/send: %d %s", code, body)
	}
	if ev := c.expect("state"); str(ev, "state") != "IDLE" {
		t.Fatalf("pushed event %v", ev)
	}
	code, body = post(t, e.url+"/internal/send", tokB, `{"session_id":"`+c.sess+`","event":{"type":"state","state":"X"}}`)
	if code == http.StatusOK {
		t.Fatalf("another token's push reached the session: %d %s", code, body)
	}
	c.ws.Close()
	for {
		code, body = post(t, e.url+"/internal/send", tok, `{"session_id":"`+c.sess+`","event":{"type":"state","state":"IDLE"}}`)
		if code != http.StatusOK {
			break
		}
	}
	if code != http.StatusConflict || !strings.Contains(body, `"error":"client_offline"`) {
		t.Fatalf("push to a session without devices: %d %s", code, body)
	}
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp.Body)
}

// TestM1Invoke: Appendix A's successful call, against an orchestrator in
// its own process: run_started, the three deltas, done with its usage.
func TestM1Invoke(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(invokeA, c.sess, ""))
	rs := c.expect("run_started")
	if str(rs, "request_id") != "req_001" || str(rs, "run_id") != "run_001" || str(rs, "session_id") != c.sess || str(rs, "agent_id") != "agent_a" {
		t.Fatalf("run_started %v", rs)
	}
	for _, want := range []string{"你好", "！有什么", "可以帮你的？"} {
		if d := c.expect("delta"); str(d, "text") != want || str(d, "run_id") != "run_001" {
			t.Fatalf("delta %v, want %q", d, want)
		}
	}
	done := c.expect("done")
	u, _ := done["usage"].(map[string]any)
	if str(done, "run_id") != "run_001" || u["total_tokens"] != json.Number("50") || u["duration_ms"] != json.Number("500") {
		t.Fatalf("done %v", done)
	}
	inv := e.callsTo(t, 1, "/internal/invoke")
	var body struct {
		SessionID, AgentID, RequestID string `json:"-"`
		Message                       struct{ Role, Content string }
	}
	_ = json.Unmarshal(inv[0].Body, &body)
	if !strings.Contains(string(inv[0].Body), `"session_id":"`+c.sess+`"`) || !strings.Contains(string(inv[0].Body), `"agent_id":"agent_a"`) || body.Message.Content != "你好" {
		t.Fatalf("invoke body %s", inv[0].Body)
	}
}

// TestM2ClientTool: the orchestrator pushes tool_request through
// /internal/send; the client's tool_result (Appendix A) reaches
// /internal/tool_calls/tc_001/submit and the run goes on. A second
// result for the same call is refused; a tool_request past its
// deadline_ts is answered to the orchestrator as failed, and the
// client's late result gets an error.
func TestM2ClientTool(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "take a screenshot", 1), c.sess, ""))
	c.expect("run_started")
	tr := c.expect("tool_request")
	if str(tr, "tool_call_id") != "tc_001" || str(tr, "tool_name") != "browser.screenshot" || str(tr, "run_id") != "run_001" || tr["deadline_ts"] == nil {
		t.Fatalf("tool_request %v", tr)
	}
	if a, _ := tr["args"].(map[string]any); a["url"] != "https://example.com" {
		t.Fatalf("tool_request args %v", tr["args"])
	}
	c.send(appendix(resultA, c.sess, "run_001"))
	if d := c.expect("delta"); str(d, "text") != "截图已完成" {
		t.Fatalf("after the result: %v", d)
	}
	c.expect("done")
	sub := e.callsTo(t, 2, "/internal/tool_calls/")
	if len(sub) != 1 || sub[0].Path != "/internal/tool_calls/tc_001/submit" || !strings.Contains(string(sub[0].Body), `"file_path":"/tmp/screenshot.png"`) ||
		!strings.Contains(string(sub[0].Body), `"ok":true`) || !strings.Contains(string(sub[0].Body), `"run_id":"run_001"`) {
		t.Fatalf("submit %v", sub)
	}
	c.send(appendix(resultA, c.sess, "run_001"))
	c.expectError("invalid_message") // answered already

	c.send(appendix(strings.Replace(invokeA, "你好", "screenshot late", 1), c.sess, ""))
	run := str(c.expect("run_started"), "run_id")
	tr = c.expect("tool_request")
	if st := c.expect("state"); str(st, "state") != "TOOL_EXPIRED" {
		t.Fatalf("past the deadline: %v", st)
	}
	if d := c.expect("delta"); !strings.Contains(str(d, "text"), "deadline_exceeded") {
		t.Fatalf("the orchestrator was not told of the deadline: %v", d)
	}
	c.expect("done")
	c.send(strings.Replace(appendix(resultA, c.sess, run), "tc_001", str(tr, "tool_call_id"), 1))
	c.expectError("invalid_message")
}

// TestM3Approval: approval_required reaches the client; Appendix A's
// decision reaches /internal/approvals/ap_001/decide; a state event
// follows; a rejection reaches the orchestrator, whose run ends rejected.
func TestM3Approval(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "transfer money", 1), c.sess, ""))
	c.expect("run_started")
	ar := c.expect("approval_required")
	if str(ar, "approval_id") != "ap_001" || str(ar, "tool_name") != "payments.transfer" || str(ar, "args_summary") != "转账 ¥100 到账户 xxx" || str(ar, "tool_call_id") != "tc_001" {
		t.Fatalf("approval_required %v", ar)
	}
	c.send(appendix(decideA, c.sess, "run_001"))
	st := c.expect("state")
	if str(st, "state") != "RUNNING" || str(st, "run_id") != "run_001" {
		t.Fatalf("state %v", st)
	}
	if d, _ := st["detail"].(map[string]any); d["decided_by"] != "client" || d["decision"] != "approve" {
		t.Fatalf("state detail %v", st["detail"])
	}
	if d := c.expect("delta"); str(d, "text") != "转账完成" {
		t.Fatalf("delta %v", d)
	}
	c.expect("done")
	dec := e.callsTo(t, 2, "/internal/approvals/")
	if len(dec) != 1 || dec[0].Path != "/internal/approvals/ap_001/decide" || !strings.Contains(string(dec[0].Body), `"decision":"approve"`) ||
		!strings.Contains(string(dec[0].Body), "已确认转账信息正确") {
		t.Fatalf("decide %v", dec)
	}

	c.send(appendix(strings.Replace(invokeA, "你好", "transfer more", 1), c.sess, ""))
	run := str(c.expect("run_started"), "run_id")
	ap := str(c.expect("approval_required"), "approval_id")
	c.send(`{"type":"approval_decision","ts":1,"run_id":"` + run + `","approval_id":"` + ap + `","decision":"reject","reason":"金额不对"}`)
	if st := c.expect("state"); str(st, "state") != "REJECTED" {
		t.Fatalf("state %v", st)
	}
	if er := c.expectError("orchestrator_error"); str(er, "run_id") != run || !strings.Contains(str(er, "message"), "rejected: 金额不对") {
		t.Fatalf("the rejection did not reach the orchestrator as rejected: %v", er)
	}
}

// TestM4Cancel: cancel_run reaches /internal/runs/:id/cancel and the run
// ends cancelled; a client gone with a run open cancels it unless
// another device of the session stays.
func TestM4Cancel(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	helloAppendix(t, c)
	c.send(appendix(strings.Replace(invokeA, "你好", "a long job", 1), c.sess, ""))
	c.expect("run_started")
	c.expect("delta")
	c.send(appendix(cancelA, c.sess, "run_001"))
	if st := c.expect("state"); str(st, "state") != "CANCELLED" || str(st, "run_id") != "run_001" {
		t.Fatalf("state %v", st)
	}
	c.expect("done")
	if cc := e.callsTo(t, 2, "/internal/runs/"); len(cc) != 1 || cc[0].Path != "/internal/runs/run_001/cancel" {
		t.Fatalf("cancel %v", cc)
	}
	c.send(appendix(cancelA, c.sess, "run_001"))
	c.expectError("invalid_message") // no such run any more

	// Two devices; one leaves: the run goes on.
	d2 := dial(t, e.url)
	d2.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tok + `","session_id":"` + c.sess + `"}`)
	d2.expect("hello_ack")
	c.send(appendix(strings.Replace(invokeA, "你好", "another long job", 1), c.sess, ""))
	run := str(c.expect("run_started"), "run_id")
	d2.expect("run_started")
	c.expect("delta")
	d2.expect("delta")
	c.ws.Close()
	d2.send(`{"type":"cancel_run","ts":1,"run_id":"` + run + `"}`) // only after the close: this shows the run was still open
	if st := d2.expect("state"); str(st, "state") != "CANCELLED" {
		t.Fatalf("state %v", st)
	}
	d2.expect("done")

	// The last device leaves with a run open: the orchestrator is told.
	d2.send(`{"type":"agent_invoke","ts":1,"request_id":"r3","message":{"role":"user","content":"long again"}}`)
	run = str(d2.expect("run_started"), "run_id")
	d2.expect("delta")
	d2.ws.Close()
	found := false
	for n := 4; !found; n++ {
		for _, cl := range e.callsTo(t, n, "/internal/runs/") {
			found = found || cl.Path == "/internal/runs/"+run+"/cancel"
		}
	}
}

// TestM5Devices: every device of a session gets every event; a device
// that reconnects with the last seq it saw gets what it missed, in
// order, once; the session's status counts its devices.
func TestM5Devices(t *testing.T) {
	e := newEnv(t, true, ingress.Options{}, ingress.HTTPOptions{})
	a := dial(t, e.url)
	helloAppendix(t, a)
	b := dial(t, e.url)
	b.send(appendix(helloA, "", "")) // the same user: the same session
	if ack := b.expect("hello_ack"); str(ack, "session_id") != a.sess {
		t.Fatalf("a second device of u1 got %v, want session %s", ack, a.sess)
	}
	code, body := get(t, e.url+"/internal/sessions/"+a.sess+"/status")
	if code != http.StatusOK || !strings.Contains(body, `"online":true`) || !strings.Contains(body, `"connection_count":2`) {
		t.Fatalf("status %d %s", code, body)
	}
	a.send(appendix(invokeA, a.sess, ""))
	for _, c := range []*client{a, b} {
		c.expect("run_started")
		for range 3 {
			c.expect("delta")
		}
		c.expect("done")
	}
	// b drops after the run's start; a run goes on; b comes back.
	a.send(appendix(strings.Replace(invokeA, "你好", "screenshot", 1), a.sess, ""))
	a.expect("run_started")
	b.expect("run_started")
	seen := b.last
	b.ws.Close()
	tr := a.expect("tool_request")
	a.send(strings.NewReplacer("run_001", str(tr, "run_id"), "tc_001", str(tr, "tool_call_id")).Replace(resultA))
	a.expect("delta")
	a.expect("done")
	b2 := dial(t, e.url)
	b2.last = seen
	b2.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tok + `","session_id":"` + a.sess + `","last_seq":` + jsonNum(seen) + `}`)
	ack := b2.expect("hello_ack")
	if ack["replayed"] != json.Number("3") || ack["gap"] != nil {
		t.Fatalf("hello_ack %v", ack)
	}
	b2.expect("tool_request")
	b2.expect("delta")
	b2.expect("done")
	a.send(appendix(invokeA, a.sess, ""))
	b2.expect("run_started") // live again, after the replay
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp.Body)
}

// TestHelloWithoutAPIKey: a hello that carries no api_key (left out, or
// misspelt as apiKey) is refused as any wrong one is, auth_failed and
// closed, but says the key is missing and what goes there, rather than
// that the token is not this server's.
func TestHelloWithoutAPIKey(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	for _, hello := range []string{
		`{"type":"hello","ts":1704067200000,"user_id":"u1","client_meta":{"app":"web","version":"1.0.0"}}`,
		`{"type":"hello","ts":1704067200000,"user_id":"u1","apiKey":"` + tok + `","client_meta":{"app":"web","version":"1.0.0"}}`,
		`{"type":"hello","ts":1704067200000,"user_id":"u1","api_key":"","client_meta":{"app":"web","version":"1.0.0"}}`,
	} {
		c := dial(t, e.url)
		c.send(hello)
		m := c.expectError("auth_failed")
		if msg := str(m, "message"); !strings.Contains(msg, "no api_key") || !strings.Contains(msg, "token") {
			t.Errorf("%s: message %q, want it to say the hello has no api_key and that the token goes there", hello, msg)
		}
		if err := c.closed(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Fatalf("after auth_failed: %v, want close 1008", err)
		}
	}
}
