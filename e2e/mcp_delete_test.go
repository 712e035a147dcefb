package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMCPDeleteEndsWaitingCall: an agent's client ends its /mcp session
// (DELETE, as the official TypeScript SDK's terminateSession sends)
// while a call of it waits for a person. The call ends where it waits,
// as docs/clients.md says: its stream is closed rather than left open
// on an ended session, and its question stays for the project's next
// call, as when a client goes away.
func TestMCPDeleteEndsWaitingCall(t *testing.T) {
	s := startServer(t, tokenA)
	agent := &rawMCP{t: t, url: s.URL + "/mcp"}
	agent.initialize()
	resp := agent.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Ended with its session?","project_directory":"/src"}}}`)
	pendingQuestion(t, s, "Ended with its session?")

	r := agent.do(http.MethodDelete, "", nil)
	_, _ = io.ReadAll(r.Body)

	ended := make(chan error, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			ev, err := nextEvent(br)
			if err != nil {
				ended <- err
				return
			}
			if strings.Contains(ev.data, `"result"`) {
				ended <- fmt.Errorf("a result on an ended session: %s", ev.data)
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the call's stream: %v", err)
		}
	case <-time.After(30 * time.Second): // a bound, not a measure: the call waits 600 s
		agent.cut()
		t.Fatal("the call's stream is still open 30 s after its session ended")
	}
	if _, id := pendingQuestion(t, s, "Ended with its session?"); id == "" {
		t.Fatal("the question left the screens with its session")
	}
}
