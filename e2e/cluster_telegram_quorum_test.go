//go:build unix

package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestClusterTelegramQuorumLost: two instances on a three-node NATS
// cluster; a question is pending in Telegram when two NATS nodes are
// killed (no quorum: no lease renewed, no note read) and the person
// replies then. Once the nodes are back one instance polls again and
// the agent has the reply; no one is told it was not taken.
func TestClusterTelegramQuorumLost(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	ns := startNATSCluster(t, 3)
	config := telegramConfig(tg.URL)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URLs(), name, config)
	}
	done := make(chan *pb.AskQuestionResponse, 1)
	// The agent asks again, same ID, when its call is let go (as
	// agentassistant-mcp does while the instance has no quorum).
	go func() {
		for try := 0; try < 100; try++ {
			r, err := connectAsk(context.Background(), srvs["a"], "tg-1", "Deploy now?")
			if err == nil {
				done <- r
				return
			}
			<-time.After(500 * time.Millisecond) // the agent's pause between calls
		}
		t.Error("the agent's calls never ended with an answer")
		done <- nil
	}()
	msg, err := strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"])
	if err != nil {
		t.Fatal(err)
	}
	js := jetStreamAt(t, ns.URLs())
	waitNoted(t, js, "tg-1")
	ns.kill9(1)
	ns.kill9(2)
	lost := time.Now()
	tg.Push(telegramtest.Reply(chat, 501, msg, "Ship it."))
	<-time.After(10 * time.Second) // the outage's length, not a wait for state
	ns.start(1)
	ns.start(2)
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != "Ship it." {
			t.Errorf("the agent got %v", got)
		}
		t.Logf("answered %v after the quorum was lost (back after 10 s)", time.Since(lost).Round(100*time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Error("the agent never got the reply")
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
