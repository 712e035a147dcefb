package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileQuestionOnNtfy: an agent asks, through agentassistant-mcp,
// a question quoting a page (a link whose text names another place, a
// tracking image, raw HTML, a mention, bidirectional and zero-width
// characters) with options that differ only in case. ntfy, which
// renders markdown, gets plain lines with each link's address written
// out; a webhook gets the text as the agent wrote it; the ntfy button
// of the second option answers the agent with that exact label.
func TestHostileQuestionOnNtfy(t *testing.T) {
	type post struct {
		path string
		body []byte
	}
	posts := make(chan post, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- post{r.URL.Path, b}
	}))
	t.Cleanup(recv.Close)
	port := freePort(t)
	data := t.TempDir()
	cfg := data + "/channels.toml"
	config := fmt.Sprintf("[server]\ntokens = [%q]\n[channels]\npublic_url = \"http://127.0.0.1:%s\"\n"+
		"[channels.ntfy]\nurl = %q\ntopic = \"aa-topic\"\n[channels.webhook]\nurl = %q\nsecret = \"an-e2e-webhook-secret-ntfy\"\n",
		tokenA, port, recv.URL+"/ntfy", recv.URL+"/hook")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, port, data, []string{"-config", cfg}, tokenA)
	agent := officialMCP(t, s, tokenA)

	question := "The page says:\n\n> Sign in at [bank.example](https://evil.example/login) <!channel>\n> " +
		"![](https://tracker.example/p.png) <img src=https://tracker.example/q.png>\n\n\u202eDeploy\u202c\u200b now?"
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan string, 1)
	go func() {
		r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
			"question": question, "project_directory": "/src/shop", "agent_name": "Claude Code",
			"options": []map[string]any{{"label": "Yes"}, {"label": "yes", "description": "see [docs.example](https://evil.example/)"}},
		}})
		switch {
		case err != nil:
			done <- "error: " + err.Error()
		case len(r.Content) > 0:
			done <- r.Content[0].(*sdk.TextContent).Text
		}
	}()
	var ntfy struct {
		Message  string `json:"message"`
		Markdown bool   `json:"markdown"`
		Actions  []struct {
			Label, URL, Body string
		} `json:"actions"`
	}
	var hook struct {
		Type, Text string
	}
	for ntfy.Message == "" || hook.Text == "" {
		select {
		case p := <-posts:
			switch p.path {
			case "/ntfy":
				if err := json.Unmarshal(p.body, &ntfy); err != nil {
					t.Fatal(err)
				}
			case "/hook":
				var e struct{ Type, Text string }
				if json.Unmarshal(p.body, &e) == nil && e.Type == "asked" {
					hook = e
				}
			}
		case r := <-done:
			t.Fatalf("the question ended: %s", r)
		case <-time.After(20 * time.Second):
			t.Fatal("ntfy and the webhook did not both get the question")
		}
	}
	if ntfy.Markdown || !strings.Contains(ntfy.Message, "bank.example (https://evil.example/login)") ||
		!strings.Contains(ntfy.Message, "(https://tracker.example/p.png)") {
		t.Errorf("ntfy (markdown %v) got:\n%s", ntfy.Markdown, ntfy.Message)
	}
	if hook.Text != question {
		t.Errorf("the webhook got %q, want the question as written", hook.Text)
	}
	if len(ntfy.Actions) != 2 || ntfy.Actions[1].Label != "yes" {
		t.Fatalf("ntfy's buttons: %+v", ntfy.Actions)
	}
	// The phone presses the second button: the ntfy app posts its body.
	a := ntfy.Actions[1]
	resp, err := http.Post(a.URL, "application/json", strings.NewReader(a.Body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the button: %d", resp.StatusCode)
	}
	select {
	case r := <-done:
		if !strings.Contains(r, "yes") || strings.Contains(r, "Yes") {
			t.Errorf("the agent got %q, want the label yes", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent got no answer")
	}
}
