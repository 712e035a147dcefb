package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

func askRPC(s *server, id, text string) chan error {
	errc := make(chan error, 1)
	go func() {
		c := agentassistprotoconnect.NewSrvAgentAssistClient(asAgent, s.URL)
		_, err := c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
			ID: id, UserToken: tokenA, Request: &pb.McpAskQuestionRequest{Question: text, Timeout: 600},
		})
		errc <- err
	}()
	return errc
}

// pendingIDs logs in to s and returns the IDs of the pending questions.
func pendingIDs(t *testing.T, s *server) []string {
	t.Helper()
	c := dial(t, s, tokenA, "fresh")
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
		t.Fatal(err)
	}
	m := must[*pb.WebsocketMessage](t)(c.Next(5 * time.Second))
	if m.GetCmd() == "RequestsLost" { // told at login: what a damaged store lost
		m = must[*pb.WebsocketMessage](t)(c.Next(5 * time.Second))
	}
	if m.GetCmd() != "GetPendingMessages" {
		t.Fatalf("waiting for GetPendingMessages: got %v", m)
	}
	var ids []string
	for _, p := range m.GetGetPendingMessagesResponse().GetPendingMessages() {
		ids = append(ids, p.GetAskQuestionRequest().GetID())
	}
	slices.Sort(ids)
	return ids
}

// TestAnswerIsOnDiskBeforeAnyoneIsTold: one device answers, another is
// told, and the server is killed the moment it is: the answer is there
// after the restart, and the agent asking again gets it.
func TestAnswerIsOnDiskBeforeAnyoneIsTold(t *testing.T) {
	port, data := freePort(t), t.TempDir()
	for round := range 3 {
		s := startServerWith(t, port, data, nil, tokenA)
		pc, phone := dial(t, s, tokenA, "pc"), dial(t, s, tokenA, "phone")
		id, answer := fmt.Sprintf("kill-%d", round), fmt.Sprintf("Answer %d", round)
		const question = "Seen as answered, answered for good?"
		askRPC(s, id, question)
		must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 5*time.Second))
		must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestion", 5*time.Second))
		if err := pc.Send(wstest.TextReply(id, answer)); err != nil {
			t.Fatal(err)
		}
		must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestionReplyNotification", 5*time.Second))
		s.kill9(t) // the moment the phone shows it answered

		s = startServerWith(t, port, data, nil, tokenA)
		if ids := pendingIDs(t, s); slices.Contains(ids, id) {
			t.Fatalf("round %d: the answered question is pending again after a kill -9", round)
		}
		c := agentassistprotoconnect.NewSrvAgentAssistClient(asAgent, s.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := c.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: tokenA, Request: &pb.McpAskQuestionRequest{Question: question, Timeout: 600}}) // the same request re-attaches
		cancel()
		if err != nil || r.GetContents()[0].GetText().GetText() != answer {
			t.Fatalf("round %d: the agent re-attaching got %v, %v; want %q", round, r, err, answer)
		}
		s.kill9(t)
	}
}

// TestFullDiskRefusesQuestions: the server may write no file beyond
// 128 KiB (RLIMIT_FSIZE, set by the shell that starts it: a full disk
// without root). Twenty large questions: each is either shown or refused
// to the agent with ResourceExhausted; after a kill -9 and a restart
// without the limit, exactly the ones shown are pending.
func TestFullDiskRefusesQuestions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a POSIX shell's ulimit")
	}
	port, data := freePort(t), t.TempDir()
	limited := []string{"sh", "-c", `ulimit -f 256 && exec "$0" "$@"`} // 256 blocks of 512 bytes
	s := startServerVia(t, limited, port, data, nil, tokenA)
	pc := dial(t, s, tokenA, "pc")
	var shown, refused []string
	for i := range 20 {
		id := fmt.Sprintf("full-%02d", i)
		errc := askRPC(s, id, fmt.Sprintf("Question %d: %s", i, strings.Repeat("x", 16<<10)))
		deadline := time.Now().Add(10 * time.Second)
	wait:
		for {
			select {
			case err := <-errc:
				var ce *connect.Error
				if connect.CodeOf(err) != connect.CodeResourceExhausted || !asConnect(err, &ce) ||
					!strings.Contains(ce.Message(), "the server cannot save the request") {
					t.Fatalf("%s refused with %v, want ResourceExhausted: the server cannot save the request", id, err)
				}
				refused = append(refused, id)
				break wait
			default:
			}
			if m, err := pc.Expect("AskQuestion", 20*time.Millisecond); err == nil {
				if got := m.GetAskQuestionRequest().GetID(); got != id {
					t.Fatalf("shown %s while asking %s", got, id)
				}
				shown = append(shown, id)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s neither shown nor refused", id)
			}
		}
	}
	if len(refused) == 0 || len(shown) == 0 {
		t.Fatalf("shown %v, refused %v: want some of each", shown, refused)
	}
	s.kill9(t)
	s = startServerWith(t, port, data, nil, tokenA)
	if got := pendingIDs(t, s); !slices.Equal(got, shown) {
		t.Fatalf("pending after the restart: %v\nshown before: %v", got, shown)
	}
}

func asConnect(err error, ce **connect.Error) bool {
	return errors.As(err, ce)
}

// stop stops s as a person would (SIGINT) and waits for it.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.killed = true
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// TestDamagedDatabaseAtStartup: the database is cut short while the server
// is stopped. It starts all the same, says what happened in its log, keeps
// the damaged file, and the questions on the pages left are pending again.
func TestDamagedDatabaseAtStartup(t *testing.T) {
	port, data := freePort(t), t.TempDir()
	s := startServerWith(t, port, data, nil, tokenA)
	pc := dial(t, s, tokenA, "pc")
	var asked []string
	for i := range 40 {
		id := fmt.Sprintf("cut-%02d", i)
		askRPC(s, id, fmt.Sprintf("Question %d: %s", i, strings.Repeat("y", 1000)))
		must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 5*time.Second))
		asked = append(asked, id)
	}
	s.stop(t)
	db := filepath.Join(data, "agentassistant.db")
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(db, fi.Size()/2/4096*4096); err != nil {
		t.Fatal(err)
	}

	s = startServerWith(t, port, data, nil, tokenA)
	got := pendingIDs(t, s)
	s.stop(t) // its log is complete once it has stopped
	if log := s.logw.String(); !strings.Contains(log, "request store was damaged") || !strings.Contains(log, "kept_as=") {
		t.Errorf("the damage is not in the log:\n%s", log)
	}
	if kept, _ := filepath.Glob(db + ".damaged-*"); len(kept) != 1 {
		t.Errorf("the damaged database was not kept: %v", kept)
	}
	if len(got) == 0 {
		t.Fatal("nothing restored")
	}
	for _, id := range got {
		if !slices.Contains(asked, id) {
			t.Errorf("restored %s, which was never asked", id)
		}
	}
	if want := fmt.Sprintf("lost=%d ", len(asked)-len(got)); !strings.Contains(s.logw.String(), want) {
		t.Errorf("the log does not say %s:\n%s", want, s.logw.String())
	}
	t.Logf("%d of %d questions on the pages left", len(got), len(asked))
}
