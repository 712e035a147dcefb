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
// -9), so nothing can be saved, although the node left still answers:
// first as the stream's leader (it says so for 10 s more), then, once it
// steps down, with a stream's info from its own copy naming no leader.
// The instance says it is unhealthy while the node left still claims
// the lead, and stays so for as long as there is no quorum; once the
// nodes are back it is healthy again, and a question asked meanwhile
// reaches the device and its answer the agent.
func TestClusterQuorumLost(t *testing.T) {
	ns := startNATSCluster(t, 3)
	one := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URLs(), "-instance", "one"}, tokenA)

	// The test's own client, on the node that stays.
	nc, err := nats.Connect("nats://127.0.0.1:"+ns.nodes[0].port, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The node that stays leads the requests' stream: once the others
	// are gone it goes on saying it leads, for 10 s, while nothing it is
	// given can be saved.
	stream := "KV_" + srvcluster.RequestsBucket
	for try := 0; leaderOf(ctx, js, stream) != "n0"; try++ {
		if try == 50 {
			t.Fatal("node 0 never led the requests' stream")
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(`{"placement":{"preferred":"n0"}}`), 5*time.Second)
	}
	healthIs(t, one, http.StatusOK)

	ns.kill9(1)
	ns.kill9(2)
	lost := time.Now()
	healthIs(t, one, http.StatusServiceUnavailable)
	t.Logf("/health 503 %s after the quorum was lost", time.Since(lost).Round(time.Millisecond))
	if l := leaderOf(ctx, js, stream); l != "n0" {
		t.Errorf("/health said 503 only once the stream's leader without a quorum stepped down (leader now %q)", l)
	}

	// Then the node left answers the stream's info without a leader:
	// the state that once made the instance say it was healthy again.
	for try := 0; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := js.Stream(sctx, stream)
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader == "" {
			break
		}
		if try == 300 {
			t.Fatalf("the node left never answered the stream's info without a leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // its leader, if it was, steps down 10 s after the loss
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

// leaderOf is the server that leads stream now, as the server the
// client is connected to says ("" when none or unknown).
func leaderOf(ctx context.Context, js jetstream.JetStream, stream string) string {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(sctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}
