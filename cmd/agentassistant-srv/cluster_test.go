package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// runServer runs agentassistant-srv in the test's process with args and
// returns the URL it prints, with its token.
func runServer(t *testing.T, args ...string) *url.URL {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr syncBuffer
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = run(ctx, append([]string{"-port", "0", "-data", t.TempDir(), "-token", "health-token-0123456789"}, args...), pw, &stderr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil {
			t.Errorf("run: %v\n%s", runErr, stderr.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := regexp.MustCompile(`http://\S+`).FindString(sc.Text()); m != "" {
				found <- m
			}
		}
	}()
	select {
	case s := <-found:
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	case <-done:
		t.Fatal("run returned before printing its URL")
	case <-time.After(20 * time.Second):
		t.Fatalf("no URL printed\n%s", stderr.String())
	}
	return nil
}

type health struct {
	Status  string `json:"status"`
	Code    int    `json:"-"`
	Mode    string `json:"mode"`
	Cluster *struct {
		Instance           string  `json:"instance"`
		NATS               string  `json:"nats"`
		Connections        int     `json:"connections"`
		ClusterConnections int     `json:"clusterConnections"`
		Share              float64 `json:"share"`
		Instances          int     `json:"instances"`
	} `json:"cluster"`
}

func getHealth(t *testing.T, u *url.URL) health {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+u.Host+"/health", nil)
	req.Header.Set("X-Agentassistant-Token", u.Query().Get("token"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := health{Code: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHealthWithoutNATS: an instance that has lost NATS can save nothing;
// /health says so with 503, so a balancer sends no one there, and says
// ok again once it is back.
func TestHealthWithoutNATS(t *testing.T) {
	ns := natstest.Start(t)
	a := runServer(t, "-nats-url", ns.URL())
	if h := getHealth(t, a); h.Code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("health with NATS = %+v", h)
	}
	ns.Shutdown()
	var h health
	for range 200 {
		if h = getHealth(t, a); h.Cluster != nil && h.Cluster.NATS != "CONNECTED" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Code != http.StatusServiceUnavailable || h.Status == "ok" {
		t.Fatalf("health without NATS = %+v", h)
	}
	ns.Restart()
	for range 200 {
		if h = getHealth(t, a); h.Cluster != nil && h.Cluster.NATS == "CONNECTED" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("health with NATS back = %+v", h)
	}
}

// TestHealthSaysSingle: without nats_url the server is one process.
func TestHealthSaysSingle(t *testing.T) {
	if h := getHealth(t, runServer(t)); h.Mode != "single" || h.Cluster != nil {
		t.Fatalf("health = %+v", h)
	}
}

// TestNATSURLSwitchesOnClusterMode: -nats-url (or nats_url) makes the
// server an instance of a cluster; /health says so, the state of its NATS
// connection, and its share of the cluster's connections.
func TestNATSURLSwitchesOnClusterMode(t *testing.T) {
	ns := natstest.Start(t)
	a := runServer(t, "-nats-url", ns.URL())
	b := runServer(t, "-nats-url", ns.URL())
	var h health
	for range 200 { // until each has heard the other's heartbeat
		if h = getHealth(t, a); h.Cluster != nil && h.Cluster.Instances == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Mode != "cluster" || h.Cluster == nil || h.Cluster.NATS != "CONNECTED" || h.Cluster.Instances != 2 || h.Cluster.Instance == "" {
		t.Fatalf("health of A = %+v", h)
	}
	if hb := getHealth(t, b); hb.Cluster == nil || hb.Cluster.Instance == h.Cluster.Instance {
		t.Fatalf("health of B = %+v", hb)
	}
}
