package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// TestClusterWatchConsumerGone: the consumers that serve the instances'
// watches of the requests go away while the connections stay up (what
// happens when the NATS node that held them is killed, or the stream's
// leadership moves, in a NATS cluster). nats.go's watcher would notice
// after two missing heartbeats, 10 s and more, all changes waiting
// meanwhile; each instance notices by itself that its watch fell
// behind the stream, says so, and watches again, and an answer given
// then reaches the agent on the other instance.
func TestClusterWatchConsumerGone(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	device := dial(t, two, tokenA, "phone")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := connectAsk(context.Background(), one, "consumer-gone", "Go on?")
		done <- res{r, err}
	}()
	must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))

	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "KV_"+srvcluster.RequestsBucket)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range stream.ConsumerNames(ctx).Name() {
		if err := stream.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 2 {
		t.Fatalf("%d consumers deleted, want the two instances' watches", n)
	}

	if err := device.Send(wstest.TextReply("consumer-gone", "Yes.")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, one, "the watch of the bucket fell behind", "bucket="+srvcluster.RequestsBucket)
	select {
	case r := <-done:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("Ask = %v, %v", r.r, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer")
	}
}
