package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

var assetRef = regexp.MustCompile(`/assets/[A-Za-z0-9._-]+\.js`)

// openFDs counts the server process's open file descriptors.
func openFDs(t *testing.T, s *server) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestStalledDownloadsAreBounded: a client without the token asks for the
// UI's largest file, many times over on one connection, and never reads
// the answer, on more connections than the server lets one address keep
// waiting. The server's write blocks inside the file handler: a handler
// serving a public file to a peer that reads nothing does nothing for
// anyone, and must count among the waiting connections, or one address
// holds a descriptor and two goroutines a connection for as long as it
// likes (5,000 such connections took 4,667 descriptors and 330 MiB) until
// the server can accept nothing. Meanwhile the owner asks and answers.
func TestStalledDownloadsAreBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts the server's descriptors in /proc")
	}
	const perAddr, n = 16, 96
	s := startServerWith(t, "0", t.TempDir(), []string{"-max-idle-connections-per-address", strconv.Itoa(perAddr)}, tokenA)
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	asset := assetRef.FindString(string(page))
	if asset == "" {
		t.Skip("the web UI is not built (make web): no file large enough to stall a write")
	}
	before := openFDs(t, s)

	req := strings.Repeat("GET "+asset+" HTTP/1.1\r\nHost: "+s.Host+":"+s.Port+"\r\n\r\n", 32)
	for i := range n {
		c, err := net.Dial("tcp", s.Host+":"+s.Port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		// One at a time: the next comes once the server answers this
		// one (its first bytes came) or closed it, so no connection is
		// closed as a slowloris before its request was read.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // only against a hang
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("stalled download %d: the server neither answered nor closed it", i)
			}
		}
	}
	if held := openFDs(t, s) - before; held > perAddr {
		t.Errorf("the server holds %d more descriptors for %d stalled downloads from one address, bound %d", held, n, perAddr)
	}

	// The owner's question is asked, seen and answered meanwhile.
	pc := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)
	done := make(chan string, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{
			"question": "Deploy?", "project_directory": "/src/shop",
		})
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- resultText(r)
	}()
	m := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))
	if err := pc.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Yes")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != "Yes" {
			t.Errorf("the owner's answer reached the agent as %q", got)
		}
	case <-time.After(10 * time.Second): // only against a hang
		t.Fatal("the agent's call did not return after the answer")
	}
}
