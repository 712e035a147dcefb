package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/store"
)

// imageReply answers id with one image of size bytes (base64 text).
func imageReply(id string, size int, fill byte) *pb.WebsocketMessage {
	return &pb.WebsocketMessage{
		Cmd:                "AskQuestionReply",
		AskQuestionRequest: &pb.AskQuestionRequest{ID: id},
		AskQuestionResponse: &pb.AskQuestionResponse{ID: id, Contents: []*pb.McpResultContent{
			{Type: 2, Image: &pb.ImageContent{Type: "image", Data: strings.Repeat(string(fill), size), MimeType: "image/png"}},
		}},
	}
}

// askAnswered asks question id through token's Connect client, lets
// phone answer it with reply, and waits for the agent to have it.
func askAnswered(t *testing.T, s *server, token string, phone *wstest.Client, id string, reply *pb.WebsocketMessage) {
	t.Helper()
	agent := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: headerToken(token)}, s.URL)
	done := make(chan error, 1)
	go func() {
		_, err := agent.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: id, UserToken: token,
			Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src/shop", Question: "Screenshot of " + id + "?", Timeout: 600}})
		done <- err
	}()
	for {
		m, err := phone.Expect("AskQuestion", 20*time.Second)
		if err != nil {
			t.Fatalf("the phone never got %s: %v", id, err)
		}
		if m.GetAskQuestionRequest().GetID() == id {
			break
		}
	}
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

// historyOf pages through token's whole history through d and returns
// its request IDs, newest first, and the bytes of their answers.
func historyOf(t *testing.T, d *wstest.Client) (ids []string, answerBytes int) {
	t.Helper()
	var before int64
	for range 1000 {
		if err := d.Send(&pb.WebsocketMessage{Cmd: "GetHistory", GetHistoryRequest: &pb.GetHistoryRequest{Before: before, Limit: 200}}); err != nil {
			t.Fatal(err)
		}
		m, err := d.Expect("GetHistory", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := m.GetGetHistoryResponse()
		for _, it := range r.GetItems() {
			ids = append(ids, it.GetAskQuestionRequest().GetID())
			for _, c := range it.GetResponse().GetContents() {
				answerBytes += len(c.GetImage().GetData()) + len(c.GetText().GetText())
			}
			before = it.GetCreatedAt()
		}
		if !r.GetMore() {
			return ids, answerBytes
		}
	}
	t.Fatal("the history did not end")
	return nil, 0
}

// boltAllocSize is the step bbolt grows its file by past its last page,
// once the file is over it (bbolt's default AllocSize).
const boltAllocSize = 16 << 20

// TestHistoryBudgetOnDisk: one token's holder answers with large images
// in a loop, five times the token's history budget. History had no
// bound but its 30 days: the loop could fill the data directory, and
// then every token's requests were refused. Now the token's history
// stays within its budget on disk, its oldest answers deleted as it
// goes and logged once; another token's history is untouched, and its
// owner still asks and answers.
func TestHistoryBudgetOnDisk(t *testing.T) {
	const budget, each, loop = 8 << 20, 1 << 20, 40
	data := t.TempDir()
	cfg := filepath.Join(data, "budget.toml")
	// What the history budget never deletes is bounded by the budgets
	// of what waits, of outcomes and of kept answers (64, 32 and 64 MiB
	// by default, under the history's 1 GiB): below this test's budget
	// too, as the server requires.
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "[server]\ntokens = [%q, %q]\n\n[requests]\nmax_history_bytes_per_token = %d\n"+
		"max_pending_bytes_per_token = %d\nmax_outcome_bytes_per_token = %d\nmax_missed_bytes_per_token = %d\n",
		tokenA, tokenB, budget, 2<<20, 2<<20, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, "0", data, []string{"-config", cfg}, tokenA, tokenB)

	phoneB := dial(t, s, tokenB, "phone-b")
	var asB []string
	for i := range 3 {
		id := fmt.Sprint("b-", i)
		askAnswered(t, s, tokenB, phoneB, id, imageReply(id, 256<<10, 'B'))
		asB = append(asB, id)
	}

	phoneA := dial(t, s, tokenA, "phone-a")
	for i := range loop {
		id := fmt.Sprint("a-", i)
		askAnswered(t, s, tokenA, phoneA, id, imageReply(id, each, byte('a'+i%26)))
	}

	gotA, bytesA := historyOf(t, phoneA)
	if bytesA > budget {
		t.Errorf("token A's history holds %d bytes of answers, past its budget of %d", bytesA, budget)
	}
	if len(gotA) == 0 || gotA[0] != fmt.Sprint("a-", loop-1) || slices.Contains(gotA, "a-0") {
		t.Errorf("token A's history is %v: want the newest answers, not the oldest", gotA)
	}
	if len(gotA) < budget/each/2 {
		t.Errorf("token A's history keeps %d answers of 1 MiB under a budget of %d MiB", len(gotA), budget>>20)
	}
	gotB, bytesB := historyOf(t, phoneB)
	slices.Reverse(gotB)
	if !slices.Equal(gotB, asB) || bytesB != 3*(256<<10) {
		t.Errorf("token B's history is %v with %d bytes of answers: want %v, whole", gotB, bytesB, asB)
	}
	// The database file: what the loop wrote (40 MiB) would be in it
	// without the budget, and bbolt's step past its last page (16 MiB,
	// its AllocSize): 56 MiB or more. With the budget: the budget, pages
	// freed but still held by a reader when the next write came (up to
	// twice the budget seen on a machine running 25 processes to a
	// CPU), and the same step.
	fi, err := os.Stat(filepath.Join(data, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 3*budget+boltAllocSize {
		t.Errorf("the database grew to %d MiB for a budget of %d MiB a token", fi.Size()>>20, budget>>20)
	}
	t.Logf("%d answers of %d MiB from one token: its history keeps %d (%d MiB), the database file is %d MiB",
		loop, each>>20, len(gotA), bytesA>>20, fi.Size()>>20)
	if n := strings.Count(s.logw.String(), "history went over its bytes on disk"); n != 1 {
		t.Errorf("the eviction was logged %d times, want once", n)
	}

	// The other token's owner still asks and is answered.
	askAnswered(t, s, tokenB, phoneB, "b-after", wstest.TextReply("b-after", "Yes"))
}
