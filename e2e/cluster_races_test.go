package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// outcome is how a device on the third instance saw a request end.
func outcomeSeen(t *testing.T, d *wstest.Client, id string) string {
	t.Helper()
	for {
		m, err := d.Next(30 * time.Second)
		if err != nil {
			t.Fatalf("%s: observer: %v", id, err)
		}
		switch m.Cmd {
		case "AskQuestionReplyNotification":
			if m.GetAskQuestionRequest().GetID() == id {
				var s string
				for _, c := range m.GetAskQuestionResponse().GetContents() {
					s += c.GetText().GetText()
				}
				return "answered " + s
			}
		case "RequestCancelled":
			if n := m.GetRequestCancelledNotification(); n.GetRequestId() == id {
				return "ended " + n.GetReason()
			}
		}
	}
}

// shown waits until d is shown the question id, reading past what it
// was told of the trials before. An Error there is a finding unless it
// says the request was no longer pending (its end won the race);
// so is a note of an earlier request's end when d was read up to that
// end already (read: it was told twice).
func shown(t *testing.T, d *wstest.Client, who, id string, read bool) *pb.WebsocketMessage {
	t.Helper()
	for {
		m, err := d.Next(30 * time.Second)
		if err != nil {
			t.Fatalf("%s: %s was never shown it: %v", id, who, err)
		}
		switch m.Cmd {
		case "AskQuestion":
			if got := m.GetAskQuestionRequest().GetID(); got != id {
				t.Fatalf("%s: %s was shown %s", id, who, got)
			}
			return m
		case "Error":
			if m.GetError().GetCode() != "not_pending" {
				t.Errorf("%s: %s told %v", id, who, m.GetError())
			}
		case "AskQuestionReplyNotification", "RequestCancelled":
			if read {
				t.Errorf("%s: %s told again how an earlier request ended: %v", id, who, m)
			}
		}
	}
}

// TestClusterEndRaces: a question asked through instance one, answered
// by a device on instance two at the moment it is withdrawn through
// instance three, or at the moment its deadline passes. Each trial ends
// one way, the same for the agent and for a device on the third
// instance: the answer given (the agent has it, the observer is told
// it), or the question ended (the agent is told, the observer is told
// it was cancelled), never both, never neither.
//
// The end is raced once both devices show the question. A record
// answered before the third instance heard it pending is heard there
// settled only (the bucket keeps one revision of a record, and a watch
// that lags skips to the latest): its device never shows that question,
// and has nothing to be told of its end.
func TestClusterEndRaces(t *testing.T) {
	c := startCluster(t)
	answerer := dial(t, c.srvs[1], tokenA, "answerer")
	observer := dial(t, c.srvs[2], tokenA, "observer")
	control := agentassistprotoconnect.NewSrvAgentAssistControlClient(asAgent, c.srvs[2].URL)
	tally := map[string]int{}
	for i := range 40 {
		withdraw := i%2 == 0
		id := fmt.Sprint("race-end-", i)
		timeout := int32(60)
		if !withdraw {
			timeout = 1
		}
		type res struct {
			r   *pb.AskQuestionResponse
			err error
		}
		done := make(chan res, 1)
		go func() {
			r, err := askClient(c.srvs[0]).AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: id, UserToken: tokenA,
				Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src", Question: "Race?", Timeout: timeout}})
			done <- res{r, err}
		}()
		q := shown(t, answerer, "answerer", id, false)
		shown(t, observer, "observer", id, true)
		var wg sync.WaitGroup
		if withdraw {
			wg.Go(func() {
				if _, err := control.CancelRequest(context.Background(), &pb.CancelRequestRequest{UserToken: tokenA, ID: id}); err != nil && connect.CodeOf(err) != connect.CodeFailedPrecondition {
					t.Errorf("%s: cancel: %v", id, err)
				}
			})
		} else {
			// the deadline: a second after the question was asked
			time.Sleep(time.Until(time.UnixMilli(q.GetAskQuestionRequest().GetTimestamp()).Add(time.Second)) - time.Duration(i%5)*time.Millisecond)
		}
		wg.Go(func() {
			if err := answerer.Send(wstest.TextReply(id, "yes")); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		var r res
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the agent's call never ended", id)
		}
		seen := outcomeSeen(t, observer, id)
		agentGotAnswer := r.err == nil && len(r.r.GetContents()) > 0 && r.r.GetContents()[0].GetText().GetText() == "yes" && !r.r.GetIsError()
		switch {
		case agentGotAnswer && seen == "answered yes":
			tally["answered"]++
		case !agentGotAnswer && seen != "answered yes" && seen[:6] == "ended ":
			tally[seen]++
		default:
			t.Errorf("%s: the agent got %v %v; the observer saw %q", id, r.r, r.err, seen)
		}
		// What the answerer was told of this one is read, and checked,
		// as the next one is shown to it.
	}
	t.Logf("outcomes: %v", tally)
}
