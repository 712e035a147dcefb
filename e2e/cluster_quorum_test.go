//go:build unix

package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// TestClusterQuorumLost: two of the three NATS nodes are killed (kill
// -9), so the requests' stream has no leader and nothing can be saved,
// although the node left still answers (it even answers a stream's info,
// from its own copy, once the stream has been without a leader for a
// while). The instance says it is unhealthy, and stays so for as long as
// there is no quorum; once the nodes are back it is healthy again, and
// a question asked meanwhile reaches the device and its answer the agent.
func TestClusterQuorumLost(t *testing.T) {
	ns := startNATSCluster(t, 3)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URLs(), "-instance", "one"}, tokenA)
	healthIs(t, one, http.StatusOK)

	ns.kill9(1)
	ns.kill9(2)
	lost := time.Now()
	healthIs(t, one, http.StatusServiceUnavailable)
	t.Logf("/health 503 %s after the quorum was lost", time.Since(lost).Round(time.Millisecond))

	// The node left answers the stream's info without a leader: the
	// state that once made the instance say it was healthy again.
	nc, err := nats.Connect("nats://127.0.0.1:"+ns.nodes[0].port, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, "KV_"+srvcluster.RequestsBucket)
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader == "" {
			break
		}
		if try == 100 {
			t.Fatalf("the node left never answered the stream's info: %v", err)
		}
	}
	// Over the next probes (one a second), /health stays 503.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if code := healthCode(one); code != http.StatusServiceUnavailable {
			t.Fatalf("/health %d without a quorum, %s after it was lost", code, time.Since(lost).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond) // spacing the checks of a state that must not change
	}

	device := dial(t, one, tokenA, "phone")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		for {
			// unavailable while the instance can save nothing: asked
			// again by the same ID, as agentassistant-mcp does
			r, err := connectAsk(context.Background(), one, "asked-without-quorum", "Still there?")
			if connect.CodeOf(err) == connect.CodeUnavailable {
				time.Sleep(100 * time.Millisecond) // the agent's backoff, not a wait for state
				continue
			}
			done <- res{r, err}
			return
		}
	}()
	ns.start(1)
	ns.start(2)
	back := time.Now()
	healthIs(t, one, http.StatusOK)
	t.Logf("/health 200 %s after the nodes were started again", time.Since(back).Round(time.Millisecond))

	q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 30*time.Second))
	if err := device.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "Yes.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("Ask = %v, %v", r.r, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer")
	}
}

// healthCode is s's /health status now (0 when it does not answer).
func healthCode(s *server) int {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(s.URL + "/health")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
