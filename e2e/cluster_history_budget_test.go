package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/store"
)

// roomBytes is what the records of token's room take in the requests
// bucket (keys and values), and their request IDs.
func roomBytes(t *testing.T, js jetstream.JetStream, token string) (size int64, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, srvcluster.RequestsBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "r."+store.Room(token)+".>", jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil {
			return size, ids
		}
		size += int64(len(e.Key()) + len(e.Value()))
		var rec struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	t.Fatal("the watch of the room's records ended")
	return 0, nil
}

// frameOf waits for d's next frame of cmd that ok accepts, whatever else
// comes meanwhile (the other devices' answers are notified to it).
func frameOf(t *testing.T, d *wstest.Client, cmd string, ok func(*pb.WebsocketMessage) bool) *pb.WebsocketMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := d.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("waiting for %s: %v", cmd, err)
		}
		if m.Cmd == cmd && ok(m) {
			return m
		}
	}
}

// askedOf accepts the question id.
func askedOf(id string) func(*pb.WebsocketMessage) bool {
	return func(m *pb.WebsocketMessage) bool { return m.GetAskQuestionRequest().GetID() == id }
}

// askThrough asks id through via as token's agent, lets phone answer it
// with reply, and waits for the agent to have it.
func askThrough(t *testing.T, via *server, token string, phone *wstest.Client, id string, reply *pb.WebsocketMessage) {
	t.Helper()
	agent := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: headerToken(token)}, via.URL)
	done := make(chan error, 1)
	go func() {
		_, err := agent.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: id, UserToken: token,
			Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src/shop", Question: "Screenshot of " + id + "?", Timeout: 600}})
		done <- err
	}()
	frameOf(t, phone, "AskQuestion", askedOf(id))
	if err := phone.Send(reply); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the agent asking %s: %v", id, err)
		}
	case <-time.After(20 * time.Second): // only against a hang
		t.Fatalf("the agent's call for %s did not return after the answer", id)
	}
}

// historyIDs is token's history through a device new on s, newest
// first.
func historyIDs(t *testing.T, s *server, token string) []string {
	t.Helper()
	d := dial(t, s, token, "reader")
	defer d.Close()
	var ids []string
	var before int64
	for range 100 {
		if err := d.Send(&pb.WebsocketMessage{Cmd: "GetHistory", GetHistoryRequest: &pb.GetHistoryRequest{Before: before, Limit: 200}}); err != nil {
			t.Fatal(err)
		}
		r := frameOf(t, d, "GetHistory", func(*pb.WebsocketMessage) bool { return true }).GetGetHistoryResponse()
		for _, it := range r.GetItems() {
			ids = append(ids, it.GetAskQuestionRequest().GetID())
			before = it.GetCreatedAt()
		}
		if !r.GetMore() {
			return ids
		}
	}
	t.Fatal("the history did not end")
	return nil
}

// TestClusterHistoryBudget: two instances in cluster mode; one token's
// devices answer with large images in a loop, six times its history
// budget, the questions asked through one instance and answered
// through the other in turn. The records in NATS had no bound but their
// age, so the loop could fill NATS's storage. Now the token's records
// stay within the budget, its oldest answers deleted as it goes, its
// question still pending is kept and still answered, another token's
// history is whole, and each instance logs the evictions once.
func TestClusterHistoryBudget(t *testing.T) {
	const budget, each, loop = 4 << 20, 512 << 10, 48
	ns := natstest.Start(t)
	js := jetStreamAt(t, ns.URL())
	var srvs []*server
	for _, name := range []string{"a", "b"} {
		data := t.TempDir()
		cfg := filepath.Join(data, "budget.toml")
		// What the budget never deletes is bounded by these, below it.
		if err := os.WriteFile(cfg, fmt.Appendf(nil, "[server]\ntokens = [%q, %q]\n\n[requests]\nmax_history_bytes_per_token = %d\n"+
			"max_pending_bytes_per_token = %d\nmax_outcome_bytes_per_token = %d\nmax_missed_bytes_per_token = %d\n",
			tokenA, tokenB, budget, 1<<20, 1<<20, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		srvs = append(srvs, startServerWith(t, "0", data, []string{"-config", cfg, "-nats-url", ns.URL(), "-instance", name}, tokenA, tokenB))
	}
	a, b := srvs[0], srvs[1]

	phoneB := dial(t, b, tokenB, "phone-b")
	var asB []string
	for i := range 3 {
		id := fmt.Sprint("b-", i)
		askThrough(t, a, tokenB, phoneB, id, imageReply(id, 256<<10, 'B'))
		asB = append(asB, id)
	}

	phones := []*wstest.Client{dial(t, a, tokenA, "phone-a"), dial(t, b, tokenA, "phone-b")}
	// The oldest of token A's: a question nobody answers yet.
	waiting := make(chan error, 1)
	go func() {
		_, err := connectAsk(context.Background(), a, "waiting", "Still there?")
		waiting <- err
	}()
	for _, p := range phones {
		frameOf(t, p, "AskQuestion", askedOf("waiting"))
	}
	for i := range loop {
		id := fmt.Sprint("a-", i)
		// Asked through one instance, answered by the phone on the other.
		askThrough(t, srvs[i%2], tokenA, phones[(i+1)%2], id, imageReply(id, each, byte('a'+i%26)))
	}

	// Eventually consistent: the last answer's eviction follows it, once
	// its writer heard it. Each look is a read of the bucket.
	var size int64
	var ids []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		if size, ids = roomBytes(t, js, tokenA); size <= budget || time.Now().After(deadline) {
			break
		}
	}
	n := len(ids)
	if !slices.Contains(ids, "waiting") {
		t.Errorf("token A's pending question is not in NATS: %v", ids)
	}
	if size > budget {
		t.Errorf("token A's records take %d bytes in NATS, past its budget of %d", size, budget)
	}
	if n < budget/each/2 {
		t.Errorf("token A keeps %d records under a budget of %d MiB of answers of %d KiB", n, budget>>20, each>>10)
	}
	t.Logf("%d answers of %d KiB from one token through two instances: %d records (%d KiB) in NATS", loop, each>>10, n, size>>10)
	gotA := historyIDs(t, b, tokenA)
	if len(gotA) == 0 || gotA[0] != fmt.Sprint("a-", loop-1) || slices.Contains(gotA, "a-0") {
		t.Errorf("token A's history is %v: want the newest answers, not the oldest", gotA)
	}
	gotB := historyIDs(t, a, tokenB)
	slices.Reverse(gotB)
	if !slices.Equal(gotB, asB) {
		t.Errorf("token B's history is %v: want %v, whole", gotB, asB)
	}
	logged := 0
	for _, s := range srvs {
		c := strings.Count(s.logw.String(), "history went over its bytes in NATS")
		if c > 1 {
			t.Errorf("an instance logged the evictions %d times, want once", c)
		}
		if strings.Contains(s.logw.String(), tokenA) {
			t.Error("an instance logged the token")
		}
		logged += c
	}
	if logged == 0 {
		t.Error("the evictions were never logged")
	}

	// The pending question stayed: answered now, its agent has it.
	if err := phones[1].Send(wstest.TextReply("waiting", "Yes")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the pending question's agent: %v", err)
		}
	case <-time.After(20 * time.Second): // only against a hang
		t.Fatal("the pending question's agent never got its answer")
	}
	askThrough(t, b, tokenB, phoneB, "b-after", wstest.TextReply("b-after", "Yes"))
}
