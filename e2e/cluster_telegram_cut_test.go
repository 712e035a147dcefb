//go:build unix

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestClusterTelegramHolderCutOff: the link to NATS of the instance that
// polls the bot goes silent for 10 s, and a person replies just then.
// The holder reads the reply but cannot read what it answers; the reply
// is not lost on it: once the lease moves (or the link is back) the
// agent has it, and the person is not told to reply again.
func TestClusterTelegramHolderCutOff(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	ns := natstest.Start(t)
	config := telegramConfig(tg.URL)
	srvs, links := map[string]*server{}, map[string]*faultproxy.Proxy{}
	for _, name := range []string{"a", "b"} {
		l, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		links[name] = l
		srvs[name] = startInstanceConfig(t, "nats://"+l.Addr(), name, config)
	}
	js := jetStreamAt(t, ns.URL())
	holder := leaseHolder(t, js, func(string) bool { return true })
	other := map[string]string{"a": "b", "b": "a"}[holder]

	done := make(chan *pb.AskQuestionResponse, 1)
	go func() {
		r, err := connectAsk(context.Background(), srvs[other], "tg-1", "Deploy now?")
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		done <- r
	}()
	msg, err := strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"])
	if err != nil {
		t.Fatal(err)
	}
	waitNoted(t, js, "tg-1")
	links[holder].SetSilent(true)
	cut := time.Now()
	back := time.AfterFunc(10*time.Second, func() { links[holder].SetSilent(false) })
	t.Cleanup(func() { back.Stop() })
	tg.Push(telegramtest.Reply(chat, 501, msg, "Ship it."))
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != "Ship it." {
			t.Errorf("the agent got %v", got)
		}
		t.Logf("answered %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	case <-time.After(45 * time.Second):
		t.Error("the agent never got the reply")
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}
