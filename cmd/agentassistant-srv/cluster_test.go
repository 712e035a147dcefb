package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
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
	Body    string `json:"-"`
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
	return getHealthAs(t, u, u.Query().Get("token"))
}

// getHealthAs is /health with token, or without one as a balancer asks.
func getHealthAs(t *testing.T, u *url.URL, token string) health {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+u.Host+"/health", nil)
	if token != "" {
		req.Header.Set("X-Agentassistant-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := health{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("/health: %v: %s", err, b)
	}
	return h
}

// TestHealthWithoutNATS: an instance that has lost NATS can save nothing;
// /health says so with 503, to a balancer's check without the token too
// (the status alone), so a balancer sends no one there, and says healthy
// again once it is back.
func TestHealthWithoutNATS(t *testing.T) {
	ns := natstest.Start(t)
	a := runServer(t, "-nats-url", ns.URL())
	balancer := func(code int, body string) {
		t.Helper()
		if h := getHealthAs(t, a, ""); h.Code != code || h.Body != body {
			t.Fatalf("a balancer's /health: %d %s, want %d %s", h.Code, h.Body, code, body)
		}
	}
	if h := getHealth(t, a); h.Code != http.StatusOK || h.Status != "healthy" {
		t.Fatalf("health with NATS = %+v", h)
	}
	balancer(http.StatusOK, `{"status":"healthy"}`)
	ns.Shutdown()
	var h health
	for range 200 {
		if h = getHealth(t, a); h.Cluster != nil && h.Cluster.NATS != "CONNECTED" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Code != http.StatusServiceUnavailable || h.Status != "unhealthy" {
		t.Fatalf("health without NATS = %+v", h)
	}
	balancer(http.StatusServiceUnavailable, `{"status":"unhealthy"}`)
	ns.Restart()
	for range 200 {
		if h = getHealth(t, a); h.Cluster != nil && h.Cluster.NATS == "CONNECTED" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Code != http.StatusOK || h.Status != "healthy" {
		t.Fatalf("health with NATS back = %+v", h)
	}
	balancer(http.StatusOK, `{"status":"healthy"}`)
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
