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

// TestClusterTelegramAskedInQuorumLoss: two instances on a three-node
// NATS cluster; a question is asked through the instance that does not
// take the replies, and Telegram answers its sendMessage only once two
// NATS nodes are killed (no quorum): its note cannot be written, and the
// instance keeps it. The nodes come back and the person replies at
// once, while the note may still be on its way to the store: the agent
// gets the reply, and no one is told it was not taken.
func TestClusterTelegramAskedInQuorumLoss(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	ns := startNATSCluster(t, 3)
	config := telegramConfig(tg.URL)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URLs(), name, config)
	}
	js := jetStreamAt(t, ns.URLs())
	holder := leaseHolder(t, js, func(string) bool { return true })
	asker := srvs[map[string]string{"a": "b", "b": "a"}[holder]]

	arrived, release := tg.Hold("sendMessage")
	t.Cleanup(release)
	done := make(chan *pb.AskQuestionResponse, 1)
	// The agent asks again, same ID, when its call is let go (as
	// agentassistant-mcp does while the instance has no quorum).
	go func() {
		for try := 0; try < 200; try++ {
			r, err := connectAsk(context.Background(), asker, "tg-1", "Deploy now?")
			if err == nil {
				done <- r
				return
			}
			<-time.After(500 * time.Millisecond) // the agent's pause between calls
		}
		t.Error("the agent's calls never ended with an answer")
		done <- nil
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the question was never sent to Telegram")
	}
	ns.kill9(1)
	ns.kill9(2)
	release()
	msg, err := strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"])
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, asker, "channel notes cannot be written just now")
	ns.start(1)
	ns.start(2)
	tg.Push(telegramtest.Reply(chat, 501, msg, "Ship it."))
	back := time.Now()
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != "Ship it." {
			t.Errorf("the agent got %v", got)
		}
		t.Logf("answered %v after the quorum was back", time.Since(back).Round(100*time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Error("the agent never got the reply")
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
