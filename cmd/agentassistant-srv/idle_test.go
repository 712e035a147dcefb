package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestIdleConnectionSettings: [limits] idle_connections and
// -max-idle-connections-per-address reach the server run starts: a flood
// of idle keep-alive connections from one address leaves at most the
// per-address bound waiting, and the owner's request gets through.
func TestIdleConnectionSettings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(cfg, []byte("[limits]\nidle_connections = 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := runServer(t, "-config", cfg, "-max-idle-connections-per-address", "6")
	for range 20 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", "http://"+u.Host+"/health", nil)
	req.Header.Set("X-Agentassistant-Token", u.Query().Get("token"))
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("the owner's /health: %v", err)
	}
	defer resp.Body.Close()
	var h struct {
		Idle struct {
			Waiting, Peak, Max, PerAddress int
			Evicted                        uint64
		} `json:"idleConnections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if st := h.Idle; st.Max != 50 || st.PerAddress != 6 || st.Peak > 6 || st.Evicted < 14 {
		t.Fatalf("idle connections: %+v", st)
	}
}
