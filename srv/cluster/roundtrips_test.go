package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestAskRoundTrips: a question asked through A and answered on C costs
// the requests bucket two writes, its record's create and its answer's
// compare-and-set, and no read: the answer is written against the
// revision the watch delivered, and nothing is looked up before the
// create. A NATS client that sees every message counts them.
func TestAskRoundTrips(t *testing.T) {
	ns := natstest.Start(t)
	a, _, c := start(t, ns.URL(), "a"), start(t, ns.URL(), "b"), start(t, ns.URL(), "c")
	onC := newClient("pc")
	c.hub.Join(tok, onC, nil, hub.Resume{})
	mon, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	sub, err := mon.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		id := fmt.Sprint("rt-", i)
		done := ask(context.Background(), a, question(id, "q?"))
		onC.expect(t, wire.CmdAskQuestion)
		if err := c.hub.Answer(context.Background(), tok, wire.AskQuestion, id, reply("pc", "x")); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, done); r.err != nil {
			t.Fatal(r.err)
		}
	}
	// Every message the server routed to mon before the flush's answer is
	// in sub's pending list once the flush returns.
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}
	pending, _, err := sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	writes, reads := 0, 0
	for range pending {
		m, err := sub.NextMsg(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(m.Subject, "$KV."+RequestsBucket+".") && strings.HasPrefix(m.Reply, "_INBOX."):
			writes++ // a client's write; the watches' deliveries are acked on $JS.ACK
		case strings.HasPrefix(m.Subject, "$JS.API.DIRECT.GET.KV_"+RequestsBucket),
			strings.HasPrefix(m.Subject, "$JS.API.STREAM.MSG.GET.KV_"+RequestsBucket):
			reads++
		}
	}
	if writes != 2*n || reads != 0 {
		t.Errorf("%d asks wrote the requests bucket %d times and read it %d times, want %d and 0", n, writes, reads, 2*n)
	}
}
