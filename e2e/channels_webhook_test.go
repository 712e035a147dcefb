package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWebhookAnswersEachOfItsTokens: a webhook configured for two
// tokens gets the questions of both; a signed answer posted where the
// event says answers the second token's agent as the first's.
func TestWebhookAnswersEachOfItsTokens(t *testing.T) {
	const secret = "an-e2e-webhook-secret"
	recv, events := startHookReceiver(t)
	s := startServerConfig(t, fmt.Sprintf("[channels.webhook]\nid = \"n8n\"\nurl = %q\nsecret = %q\ntokens = [%q, %q]\n",
		recv.URL, secret, tokenA, tokenB), tokenA, tokenB)

	for _, tok := range []string{tokenA, tokenB} {
		agent := officialMCP(t, s, tok)
		done := make(chan *sdk.CallToolResult, 1)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			r, _ := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
				"question": "Deploy?", "project_directory": "/src/shop", "agent_name": "Claude Code",
			}})
			done <- r
		}()
		asked := askedEvent(t, events, "Deploy?")
		signed, _ := asked["answer"].(map[string]any)["signed"].(string)
		if code, msg := postSigned(t, s.URL+signed, secret, fmt.Sprintf(`{"id":%q,"text":"Ship it."}`, asked["id"])); code != http.StatusOK {
			t.Fatalf("%s: the signed answer at %s: %d %s", tok, signed, code, msg)
		}
		select {
		case r := <-done:
			if r == nil || len(r.Content) == 0 || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "Ship it.") {
				t.Fatalf("%s: the agent got %+v", tok, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the agent got no answer", tok)
		}
	}
}

// startHookReceiver is a webhook's receiver: the events posted to it
// come on events.
func startHookReceiver(t *testing.T) (*httptest.Server, <-chan map[string]any) {
	events := make(chan map[string]any, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) == nil {
			events <- e
		}
	}))
	t.Cleanup(recv.Close)
	return recv, events
}

// askedEvent is the next asked event of events whose text is question,
// those before it skipped.
func askedEvent(t *testing.T, events <-chan map[string]any, question string) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e["type"] == "asked" && e["text"] == question {
				return e
			}
		case <-deadline:
			t.Fatalf("no asked event for %q", question)
		}
	}
}

// postSigned posts body to url signed with secret, as a webhook's
// receiver answers: its status and what it said.
func postSigned(t *testing.T, url, secret, body string) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + body))
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Agentassistant-Timestamp", ts)
	req.Header.Set("X-Agentassistant-Signature", "v1="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(msg)
}
