package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// rssBytes is the server process's resident memory.
func rssBytes(t *testing.T, s *server) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// headerToken presents a token in the header, as a Connect message of
// more than 64 KiB needs.
type headerToken string

func (h headerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(auth.TokenHeader, string(h))
	return http.DefaultTransport.RoundTrip(r)
}

// TestPendingFloodIsBounded: one token's agent (a loop, a leaked token)
// asks hundreds of questions at once, each of 1 MiB. Every waiting
// request is held in memory and in the store, so the server grew by
// about 7 bytes for each byte asked (64 questions of 4 MB: 1.6 GB)
// with no bound but the machine's. Now past the token's bound the rest
// are refused at once (resource_exhausted, naming the setting); the
// server's memory stays within a few hundred MiB; another token's
// owner asks and answers meanwhile, and so does the token's own owner
// within what the flood left; a question that does not fit is refused
// to its agent, saying why, and taken once the flood's calls end.
func TestPendingFloodIsBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the server's memory in /proc")
	}
	const n, size = 200, 1 << 20
	s := startServer(t, tokenA, tokenB)
	before := rssBytes(t, s)

	flood := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: headerToken(tokenA)}, s.URL)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	refused := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			text := strings.Repeat(string(rune('a'+i%26)), size) + strconv.Itoa(i)
			_, err := flood.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint("flood-", i), UserToken: tokenA,
				Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src/loop", Question: text, Timeout: 600}})
			if ctx.Err() == nil {
				refused <- err
			}
		})
	}
	// Past the default bound (64 MiB) the rest are refused, at once: a
	// refusal comes for each but about 64.
	var last error
	for i := range n - 70 {
		select {
		case last = <-refused:
		case <-time.After(30 * time.Second): // only against a hang
			t.Fatalf("%d of %d questions from one token refused; the rest wait, and the server grew by %d MiB", i, n, (rssBytes(t, s)-before)>>20)
		}
		if connect.CodeOf(last) != connect.CodeResourceExhausted {
			t.Fatalf("a request past the bound: %v, want resource_exhausted", last)
		}
	}
	if !strings.Contains(last.Error(), "[requests] max_pending_bytes_per_token") {
		t.Errorf("the refusal does not name the setting: %v", last)
	}
	grew := rssBytes(t, s) - before
	if grew > 768<<20 {
		t.Errorf("%d questions of 1 MiB from one token grew the server by %d MiB", n, grew>>20)
	}
	t.Logf("%d questions of 1 MiB from one token: the server grew by %d MiB", n, grew>>20)

	// Another token's owner: asked, seen, answered; and this token's
	// owner too, with a question within what the flood left.
	roundTrip(t, s, tokenB, "Deploy?")
	roundTrip(t, s, tokenA, "Deploy?")

	// An agent whose question does not fit is told at once why, in its
	// tool's result.
	agent := startMCP(t, s, tokenA)
	long := strings.Repeat("Deploy? ", 1<<18)
	r, err := callTool(context.Background(), agent, "ask_question", map[string]any{"question": long, "project_directory": "/src/shop"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := resultText(r); !r.IsError || !strings.Contains(txt, "resource_exhausted") || !strings.Contains(txt, "max_pending_bytes_per_token") {
		t.Errorf("the agent's question past the bound: %.300q", txt)
	}

	// The flood's calls end; their requests go with them, and the
	// question that did not fit is taken.
	stop()
	wg.Wait()
	roundTrip(t, s, tokenA, long)
}

// roundTrip: token's agent asks question through agentassistant-mcp,
// token's phone gets it and answers, the agent gets the answer.
func roundTrip(t *testing.T, s *server, token, question string) {
	t.Helper()
	phone := dial(t, s, token, "phone")
	agent := startMCP(t, s, token)
	done := make(chan string, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{
			"question": question, "project_directory": "/src/shop",
		})
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- resultText(r)
	}()
	deadline := time.Now().Add(20 * time.Second) // only against a hang
	for {
		// What the flood left may still be told as it goes.
		m, err := phone.Next(time.Until(deadline))
		if err != nil {
			select {
			case got := <-done:
				t.Fatalf("the phone never got the question; the agent got %.300q", got)
			default:
				t.Fatal(err)
			}
		}
		if q := m.GetAskQuestionRequest(); m.Cmd == "AskQuestion" && q.GetRequest().GetQuestion() == question {
			if err := phone.Send(wstest.TextReply(q.GetID(), "Yes")); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	select {
	case got := <-done:
		if got != "Yes" {
			t.Errorf("the owner's answer reached the agent as %q", got)
		}
	case <-time.After(20 * time.Second): // only against a hang
		t.Fatal("the agent's call did not return after the answer")
	}
}
