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
	"github.com/agentassistant/agentassistant/srv/store"
)

// savedAnswer reads the request record id of tokenA straight from the
// cluster's NATS and returns its revision once it is answered, 0 while
// it is not (or NATS is not back).
func savedAnswer(t *testing.T, js jetstream.JetStream, id string) uint64 {
	t.Helper()
	rec, rev, ok := readRecord(t, js, id)
	if !ok || rec.Status != store.Answered {
		return 0
	}
	return rev
}

// TestClusterNATSRestartHeardAtOnce: NATS restarts while a question waits
// (its data kept); a device on instance two answers as soon as it can.
// Instance one, where the agent waits and another device is, hears the
// answer: its watch of the records is made again because NATS came back
// (it says so in its log), not only once nats.go's heartbeat check
// notices the lost consumer, 10 s or more later (that it is made again at
// once on a reconnect is srv/cluster's TestRewatchReconnect*, with no
// clock). Then the agent and the other device have the answer, the
// device's notification numbered by the answer's revision.
func TestClusterNATSRestartHeardAtOnce(t *testing.T) {
	ns := natstest.Start(t)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "one"}, tokenA)
	two := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "two"}, tokenA)
	pc := dial(t, one, tokenA, "pc")
	phone := dial(t, two, tokenA, "phone")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := connectAsk(context.Background(), one, "across-restart", "Still there?")
		done <- res{r, err}
	}()
	must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))
	must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestion", 10*time.Second))

	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ns.Restart()
	// Until instance two is back on NATS the answer is refused as not
	// saved (the question stays); the phone tries again.
	var rev uint64
	for try := 0; rev == 0; try++ {
		if try == 200 {
			t.Fatal("the answer was never saved")
		}
		if err := phone.Send(wstest.TextReply("across-restart", "Yes.")); err != nil {
			t.Fatal(err)
		}
		m, err := phone.Next(500 * time.Millisecond)
		switch {
		case err == nil && m.Cmd == "Error" && m.GetError().GetCode() == "not_saved":
			time.Sleep(100 * time.Millisecond)
		case err == nil && m.Cmd != "UserConnectionStatusNotification" && m.Cmd != "GetOnlineUsers":
			t.Fatalf("answer after the restart: %v", m)
		}
		rev = savedAnswer(t, js, "across-restart")
	}

	waitHeard(t, one, pc.Login.GetEpoch(), rev)
	if !logged(one, `msg="watching the bucket again after NATS came back"`, "bucket="+srvcluster.RequestsBucket) {
		t.Errorf("instance one heard the answer without watching the records again after NATS came back")
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("Ask = %v, %v", r.r, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never got the answer")
	}
	if n := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestionReplyNotification", 10*time.Second)); n.GetSeq() != rev {
		t.Fatalf("notification numbered %d, the answer's revision is %d", n.GetSeq(), rev)
	}
}
