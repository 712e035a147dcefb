package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// history asks for a page of the history through d and returns its
// questions, newest first, and whether older ones exist.
func history(t *testing.T, d *wstest.Client, limit int32) ([]string, bool) {
	t.Helper()
	if err := d.Send(&pb.WebsocketMessage{Cmd: "GetHistory", GetHistoryRequest: &pb.GetHistoryRequest{Limit: limit}}); err != nil {
		t.Fatal(err)
	}
	r := must[*pb.WebsocketMessage](t)(d.Expect("GetHistory", 10*time.Second)).GetGetHistoryResponse()
	var out []string
	for _, it := range r.GetItems() {
		out = append(out, it.GetAskQuestionRequest().GetRequest().GetQuestion())
	}
	return out, r.GetMore()
}

// TestClusterHistoryOnAnotherInstance: questions asked through C and
// answered by a device on A are the history of a device on B, newest
// first and paged; cleared through B, A's history is empty.
func TestClusterHistoryOnAnotherInstance(t *testing.T) {
	c := startCluster(t)
	onA := dial(t, c.srvs[0], tokenA, "device-a")
	for i := range 3 {
		done := make(chan error, 1)
		go func() {
			_, err := connectAsk(context.Background(), c.srvs[2], fmt.Sprint("h", i), fmt.Sprint("Question ", i))
			done <- err
		}()
		q := must[*pb.WebsocketMessage](t)(onA.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
		if err := onA.Send(wstest.TextReply(q.GetID(), fmt.Sprint("answer ", i))); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the agent never got the answer")
		}
	}
	onB := dial(t, c.srvs[1], tokenA, "device-b")
	if got, more := history(t, onB, 2); fmt.Sprint(got) != "[Question 2 Question 1]" || !more {
		t.Fatalf("B's first page = %q, more %v", got, more)
	}
	if got, more := history(t, onA, 10); fmt.Sprint(got) != "[Question 2 Question 1 Question 0]" || more {
		t.Fatalf("A's history = %q, more %v", got, more)
	}
	if err := onB.Send(&pb.WebsocketMessage{Cmd: "ClearHistory"}); err != nil {
		t.Fatal(err)
	}
	if n := must[*pb.WebsocketMessage](t)(onB.Expect("ClearHistory", 10*time.Second)).GetStrParam(); n != "3" {
		t.Fatalf("cleared %s, want 3", n)
	}
	if got, more := history(t, onA, 10); len(got) != 0 || more {
		t.Fatalf("A's history after the clear = %q, more %v", got, more)
	}
}
