package channel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestWebhookAnswersSeveral: the asked event of a question that takes
// several options names them and says so; a signed answer may then be a
// list ("texts"), which reaches the agent one text each, as the inbox
// answers; a body with both text and texts, or an empty list, is
// refused (400); the answered event carries every text.
func TestWebhookAnswersSeveral(t *testing.T) {
	recv := newReceiver(t)
	hook := &Webhook{ID: "n8n", URL: recv.URL, Secret: "s3cret-s3cret-s3cret", Token: tokA}
	f := newFixture(t, map[string][]Channel{tokA: {hook}}, Options{})
	answered := f.askSeveral(tokA, "q-1")
	_, bodies := recv.waitFor(t, 1)
	var e struct {
		webhookEvent
		Options     []string `json:"options"`
		MultiSelect bool     `json:"multi_select"`
	}
	if err := json.Unmarshal(bodies[0], &e); err != nil || e.Answer == nil {
		t.Fatalf("event %s: %v", bodies[0], err)
	}
	if strings.Join(e.Options, "|") != "Web|Mobile|Desktop" || !e.MultiSelect {
		t.Errorf("event %s: want its options and multi_select", bodies[0])
	}
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", f.public.URL+e.Answer.Signed, strings.NewReader(body))
		ts := time.Now().Unix()
		req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
		req.Header.Set(SignatureHeader, sign("s3cret-s3cret-s3cret", ts, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, bad := range []string{
		`{"id":"q-1","text":"Web","texts":["Desktop"]}`,
		`{"id":"q-1","texts":[]}`,
		`{"id":"q-1","texts":["Web",""]}`,
		`{"id":"q-1","texts":"Web"}`,
	} {
		if code, body := post(bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := post(`{"id":"q-1","texts":["Web","Desktop"],"by":"Ana"}`); code != http.StatusOK {
		t.Fatalf("a list: %d %s", code, body)
	}
	if rep := answer(t, answered); texts(rep) != "Web|Desktop" || rep.Door != "webhook" {
		t.Fatalf("the agent got %q", texts(rep))
	}
	_, bodies = recv.waitFor(t, 2)
	var done struct {
		Replies []string `json:"replies"`
	}
	if err := json.Unmarshal(bodies[1], &done); err != nil || strings.Join(done.Replies, "|") != "Web|Desktop" {
		t.Errorf("answered event %s: want every text in replies", bodies[1])
	}
}

// TestWebhookNamesTheAskerAsTheOtherChannels: an event's agent is the
// agent's name as one line, else its MCP client's, as the other
// channels and the inbox name who asks.
func TestWebhookNamesTheAskerAsTheOtherChannels(t *testing.T) {
	recv := newReceiver(t)
	w := &Webhook{ID: "n8n", URL: recv.URL, Secret: "s3cret", Token: tokA}
	for i, c := range []struct {
		req  hub.Request
		want string
	}{
		{hub.Request{AgentName: "Claude Code", McpClientName: "claude-code"}, "Claude Code"},
		{hub.Request{McpClientName: "Cursor"}, "Cursor"},
		{hub.Request{AgentName: "Shop\n\u202ebot "}, "Shopbot"},
		{hub.Request{}, ""},
	} {
		c.req.Kind, c.req.ID, c.req.Text = wire.AskQuestion, "q", "Deploy?"
		if err := w.Send(context.Background(), Notice{Event: hub.Event{Kind: hub.Asked, Request: c.req}}); err != nil {
			t.Fatal(err)
		}
		_, bodies := recv.waitFor(t, i+1)
		var e webhookEvent
		if err := json.Unmarshal(bodies[i], &e); err != nil {
			t.Fatal(err)
		}
		if e.Agent != c.want {
			t.Errorf("%+v: agent %q, want %q", c.req, e.Agent, c.want)
		}
	}
}
