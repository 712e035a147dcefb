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
	events := make(chan map[string]any, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) == nil {
			events <- e
		}
	}))
	t.Cleanup(recv.Close)
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
		var asked map[string]any
		for asked == nil {
			select {
			case e := <-events:
				if e["type"] == "asked" {
					asked = e
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no asked event", tok)
			}
		}
		signed, _ := asked["answer"].(map[string]any)["signed"].(string)
		body := fmt.Sprintf(`{"id":%q,"text":"Ship it."}`, asked["id"])
		ts := time.Now().Unix()
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(strconv.FormatInt(ts, 10) + "." + body))
		req, _ := http.NewRequest("POST", s.URL+signed, strings.NewReader(body))
		req.Header.Set("X-Agentassistant-Timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("X-Agentassistant-Signature", "v1="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: the signed answer at %s: %d %s", tok, signed, resp.StatusCode, msg)
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
