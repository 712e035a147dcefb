package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentassistant/agentassistant/srv/store"
)

// TestOneTapAnswersCannotBeReplayedOrForged: the capability a
// notification's button answers with (an ntfy button's, a push
// action's, a webhook event's answer.cap) answers its one question
// once, by POST from no other origin. A mail scanner or a link
// preview that fetches the answer's address (GET, HEAD, with the
// capability in the query) answers nothing (405); nor does the same
// POST from another origin's page (403), a capability made over into
// another token's question (410), one used already (410), one whose
// question was settled elsewhere (409: no longer pending), nor after a
// restart one used before it (409). Each time the question stays
// pending, or keeps the answer it had.
func TestOneTapAnswersCannotBeReplayedOrForged(t *testing.T) {
	const secret = "an-e2e-webhook-secret-cap"
	events := make(chan map[string]any, 32)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) == nil && e["type"] == "asked" {
			events <- e
		}
	}))
	t.Cleanup(recv.Close)
	port := freePort(t)
	data := t.TempDir()
	cfg := data + "/channels.toml"
	config := fmt.Sprintf("[server]\ntokens = [%q, %q]\n[channels]\npublic_url = \"http://127.0.0.1:%s\"\n[channels.webhook]\nid = \"n8n\"\nurl = %q\nsecret = %q\ntokens = [%q, %q]\n",
		tokenA, tokenB, port, recv.URL, secret, tokenA, tokenB)
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, port, data, []string{"-config", cfg}, tokenA, tokenB)

	// ask has token's agent ask a question offering Deploy and Wait, and
	// returns the event the webhook got and where the agent's result
	// comes.
	ask := func(s *server, token, question string) (map[string]any, chan string) {
		t.Helper()
		agent := officialMCP(t, s, token)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan string, 1)
		go func() {
			r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
				"question": question, "project_directory": "/src/shop", "agent_name": "Claude Code",
				"options": []map[string]any{{"label": "Deploy"}, {"label": "Wait"}},
			}})
			switch {
			case err != nil:
				done <- "error: " + err.Error()
			case len(r.Content) > 0:
				done <- r.Content[0].(*sdk.TextContent).Text
			default:
				done <- ""
			}
		}()
		for {
			select {
			case e := <-events:
				if e["text"] == question {
					return e, done
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no event for %q", question)
			}
		}
	}
	capOf := func(e map[string]any) string { return e["answer"].(map[string]any)["cap"].(string) }
	do := func(method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tap := func(capName, text string, header map[string]string) (int, string) {
		b, _ := json.Marshal(map[string]string{"cap": capName, "text": text})
		if header == nil {
			header = map[string]string{"Content-Type": "application/json"}
		}
		return do("POST", "/push/answer", string(b), header)
	}
	pending := func(done chan string, what string) {
		t.Helper()
		select {
		case got := <-done:
			t.Fatalf("%s answered the question: %q", what, got)
		default:
		}
	}
	answered := func(done chan string, want string) {
		t.Helper()
		select {
		case got := <-done:
			if !strings.Contains(got, want) {
				t.Fatalf("the agent got %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the agent got no answer")
		}
	}

	eA, doneA := ask(s, tokenA, "Deploy A?")
	eB, doneB := ask(s, tokenB, "Deploy B?")
	capA := capOf(eA)

	// A mail scanner, a link preview, a prefetch: never an answer.
	for _, m := range []string{"GET", "HEAD"} {
		for _, path := range []string{"/push/answer", "/push/answer?cap=" + capA + "&text=Deploy"} {
			if code, body := do(m, path, "", nil); code != http.StatusMethodNotAllowed {
				t.Errorf("%s %.40s…: %d %s, want 405", m, path, code, body)
			}
		}
	}
	// Another origin's page posting the same body, as a form would.
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example", "Content-Type": "application/json"},
		{"Origin": "https://evil.example", "Content-Type": "text/plain"},
		{"Origin": "null", "Content-Type": "text/plain"},
	} {
		if code, body := tap(capA, "Deploy", h); code != http.StatusForbidden {
			t.Errorf("a tap from origin %s: %d %s, want 403", h["Origin"], code, body)
		}
	}
	// The capability made over into B's question: its seal or its
	// signature no longer holds.
	for _, f := range forged(capA, store.Room(tokenB), eB["id"].(string)) {
		if code, body := tap(f, "Deploy", nil); code != http.StatusGone {
			t.Errorf("a capability made over into another token's question: %d %s, want 410", code, body)
		}
	}
	pending(doneA, "a prefetch, another origin or a forged capability")
	pending(doneB, "a forged capability")

	// The one tap that answers, then its replay.
	if code, body := tap(capA, "Wait", nil); code != http.StatusOK {
		t.Fatalf("the tap: %d %s", code, body)
	}
	answered(doneA, "Wait")
	if code, body := tap(capA, "Deploy", nil); code != http.StatusGone {
		t.Errorf("the tap again: %d %s, want 410", code, body)
	}

	// B's question settled elsewhere (the signed webhook answer): its
	// capability answers nothing after.
	body := fmt.Sprintf(`{"id":%q,"text":"Deploy"}`, eB["id"])
	ts := time.Now().Unix()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "." + body))
	if code, msg := do("POST", "/channels/webhook/n8n/answer", body, map[string]string{"X-Agentassistant-Timestamp": strconv.FormatInt(ts, 10),
		"X-Agentassistant-Signature": "v1=" + hex.EncodeToString(mac.Sum(nil)), "Content-Type": "application/json"}); code != http.StatusOK {
		t.Fatalf("the signed answer: %d %s", code, msg)
	}
	answered(doneB, "Deploy")
	if code, body := tap(capOf(eB), "Wait", nil); code != http.StatusConflict {
		t.Errorf("the tap once settled elsewhere: %d %s, want 409", code, body)
	}

	// After a restart the claims are forgotten: the question's answer,
	// on disk, still refuses the capability used before.
	s.kill9(t)
	s = startServerWith(t, port, data, []string{"-config", cfg}, tokenA, tokenB)
	if code, body := tap(capA, "Deploy", nil); code != http.StatusConflict {
		t.Errorf("the tap after a restart: %d %s, want 409", code, body)
	}
}

// forged is capability c made over: a byte of it changed, and a
// payload in the clear naming question id of room, as an earlier
// release signed its capabilities, under a signature made up.
func forged(c, room, id string) []string {
	b := []byte(c)
	b[len(b)/2] ^= 1
	p, _ := json.Marshal(map[string]any{"r": room, "k": 1, "i": id, "e": time.Now().Add(time.Hour).Unix(), "n": "forged"})
	sig := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	return []string{string(b), base64.RawURLEncoding.EncodeToString(p) + "." + sig}
}
