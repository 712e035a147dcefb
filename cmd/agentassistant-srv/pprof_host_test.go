package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer run's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var profilesLine = regexp.MustCompile(`"serving profiles" addr=(\S+)`)

// TestProfilesCheckHost: the profiling listener, started through run as a
// maintainer would, refuses a Host that is not this machine's (DNS
// rebinding), as the main port does.
func TestProfilesCheckHost(t *testing.T) {
	t.Setenv("AGENTASSISTANT_PPROF", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", "0", "-data", t.TempDir(), "-token", "pprof-test-token"}, &bytes.Buffer{}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := profilesLine.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no profiles address logged: %s", stderr.String())
		}
	}
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]int{
		"evil.com":           http.StatusForbidden,
		"evil.com:" + port:   http.StatusForbidden,
		"localhost.:" + port: http.StatusForbidden,
		"127.0.0.1:" + port:  http.StatusOK,
		"localhost:" + port:  http.StatusOK,
	} {
		for _, p := range []string{"/debug/memory", "/debug/pprof/"} {
			req, _ := http.NewRequest("GET", "http://"+addr+p, nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("Host %s %s: %d, want %d", host, p, resp.StatusCode, want)
			}
		}
	}
}
