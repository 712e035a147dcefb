//go:build unix

package e2e

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestClusterTelegramSentWithoutQuorum: a question's sendMessage is
// slow to come back (the link to Telegram delayed), and the NATS
// cluster loses its quorum meanwhile: the message is with the person,
// its note cannot be written. The instance keeps the note and writes it
// once the quorum is back; the person's reply, given then, answers the
// agent, and no one is told it was not taken.
func TestClusterTelegramSentWithoutQuorum(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	u, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	link, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	ns := startNATSCluster(t, 3)
	config := telegramConfig("http://" + link.Addr())
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URLs(), name, config)
	}
	done := make(chan *pb.AskQuestionResponse, 1)
	go func() {
		for try := 0; try < 100; try++ {
			r, err := connectAsk(context.Background(), srvs["a"], "tg-kept", "Deploy now?")
			if err == nil {
				done <- r
				return
			}
			<-time.After(500 * time.Millisecond) // the agent's pause between calls
		}
		t.Error("the agent's calls never ended with an answer")
		done <- nil
	}()
	// Every chunk either way waits: the sendMessage's answer comes back
	// after the quorum is gone.
	link.SetDelay(2 * time.Second)
	msg, err := strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"])
	if err != nil {
		t.Fatal(err)
	}
	ns.kill9(1)
	ns.kill9(2)
	waitLogAny(t, []*server{srvs["a"], srvs["b"]}, "channel notes cannot be written just now")
	link.SetDelay(0)
	ns.start(1)
	ns.start(2)
	waitLogAny(t, []*server{srvs["a"], srvs["b"]}, "channel notes kept meanwhile are written")
	tg.Push(telegramtest.Reply(chat, 601, msg, "Ship it."))
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != "Ship it." {
			t.Errorf("the agent got %v", got)
		}
	case <-time.After(60 * time.Second):
		t.Error("the agent never got the reply")
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}

// waitLogAny waits until a line of one of srvs' logs holds every one of
// parts.
func waitLogAny(t *testing.T, srvs []*server, parts ...string) {
	t.Helper()
	for try := 0; ; try++ {
		for _, s := range srvs {
			if logged(s, parts...) {
				return
			}
		}
		if try == 3000 {
			t.Fatalf("no server logged %q", parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
