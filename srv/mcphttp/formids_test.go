package mcphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// replyAsker is an asker whose form answers (AskQuestionReply) the test
// reads with the question each one answers.
type replyAsker struct {
	*asker
	replied chan formReply
}

type formReply struct{ question, text string }

func (f replyAsker) AskQuestionReply(_ context.Context, r *pb.AskQuestionReplyRequest) error {
	var text []string
	for _, c := range r.GetResponse().GetContents() {
		text = append(text, c.GetText().GetText())
	}
	f.replied <- formReply{r.GetResponse().GetID(), strings.Join(text, "\n")}
	return nil
}

// formOf reads the stream of a call until its form (elicitation/create)
// and gives the form's JSON-RPC id.
func formOf(t *testing.T, r io.Reader) json.RawMessage {
	t.Helper()
	br := bufio.NewReader(r)
	for {
		ev, err := next(br)
		if err != nil {
			t.Fatalf("the call's stream ended before its form: %v", err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(ev.data), &m) == nil && m.Method == "elicitation/create" {
			return m.ID
		}
	}
}

// TestFormIDsUniqueAcrossInstances: two calls of one session ask, one
// through each instance, and each shows its form in the client. Each
// instance's MCP server numbers its requests to the client on its own,
// yet the client holds both forms at once: their ids differ, and each
// answer, POSTed through the other instance, answers its own form's
// question.
func TestFormIDsUniqueAcrossInstances(t *testing.T) {
	be := replyAsker{newAsker(), make(chan formReply, 4)}
	_, bases := newRelayPeers(t, 2, be)
	sid := initializeWithForms(t, bases[0], "token-a")

	call := func(base, body string) *http.Response {
		t.Helper()
		resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+"?t=token-a", sid, body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := formOf(t, call(bases[0], askBody).Body)
	be.await(func() bool { return len(be.ids) == 1 })
	second := formOf(t, call(bases[1], `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Roll back?","project_directory":"/p"}}}`).Body)
	be.await(func() bool { return len(be.ids) == 2 })
	if string(first) == string(second) {
		t.Fatalf("the forms of two instances have the same id %s", first)
	}

	answer := func(base string, form json.RawMessage, text string) {
		t.Helper()
		resp := call(base, `{"jsonrpc":"2.0","id":`+string(form)+`,"result":{"action":"accept","content":{"answer":"`+text+`"}}}`)
		_, _ = io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("the form's answer: %d", resp.StatusCode)
		}
	}
	answer(bases[1], first, "deploy")
	if got := <-be.replied; got.question != be.ids[0] || got.text != "deploy" {
		t.Fatalf("the first form's answer went to %q (%q), not the first question %q", got.question, got.text, be.ids[0])
	}
	answer(bases[0], second, "roll back")
	if got := <-be.replied; got.question != be.ids[1] || got.text != "roll back" {
		t.Fatalf("the second form's answer went to %q (%q), not the second question %q", got.question, got.text, be.ids[1])
	}
}
