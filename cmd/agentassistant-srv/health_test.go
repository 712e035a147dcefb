package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestHealthProbe: the container's health check passes on 200 only.
func TestHealthProbe(t *testing.T) {
	for code, ok := range map[int]bool{200: true, 503: false, 401: false} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(code)
			_, _ = io.WriteString(w, `{"status":"x"}`)
		}))
		var out strings.Builder
		err := run(context.Background(), []string{"health", "-url", ts.URL + "/health"}, &out, io.Discard)
		ts.Close()
		if (err == nil) != ok {
			t.Errorf("status %d: health = %v", code, err)
		}
	}
}

// TestHealthTakesTheServersPortAndHost: "health -port N" (and -host, as
// the server itself is started) asks the local server on that port, as
// a person who started it with -port would write; a wildcard -host
// (0.0.0.0, ::) means this machine. -url with them is refused: one
// address, said once.
func TestHealthTakesTheServersPortAndHost(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Host+r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"status":"healthy"}`)
	}))
	defer ts.Close()
	u, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	for _, args := range [][]string{
		{"-port", port},
		{"-port=" + port, "-host", "127.0.0.1"},
		{"-host", "0.0.0.0", "-port", port},
		{"-host", "", "-port", port},
		{"-host", "localhost", "-port", port},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		var out strings.Builder
		if err := run(context.Background(), append([]string{"health"}, args...), &out, io.Discard); err != nil {
			t.Errorf("health %v: %v", args, err)
			continue
		}
		mu.Lock()
		want := "127.0.0.1:" + port + "/health"
		if args[1] == "localhost" {
			want = "localhost:" + port + "/health"
		}
		if len(asked) != 1 || asked[0] != want {
			t.Errorf("health %v asked %v, want %s", args, asked, want)
		}
		mu.Unlock()
		if !strings.Contains(out.String(), "healthy") {
			t.Errorf("health %v printed %q", args, out.String())
		}
	}
	for args, want := range map[string]string{
		"-url http://127.0.0.1:1/health -port 22080": "-url or -port",
		"-port 70000": "1 to 65535",
		"-port 0":     "1 to 65535",
	} {
		err := run(context.Background(), append([]string{"health"}, strings.Fields(args)...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("health %s: %v, want it to say %q", args, err, want)
		}
	}
}

// TestHealthOfTheServersAddress: -url given as the server's address
// alone (https://inbox.example.org, as a person copies it from the
// browser) asks its /health, not its page: the page answers 200 while
// the server is unhealthy, and a health check that read it would pass.
func TestHealthOfTheServersAddress(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/health" {
			_, _ = io.WriteString(w, "<!doctype html><title>Agent Assistant</title>")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"unhealthy"}`)
	}))
	defer ts.Close()
	for _, u := range []string{ts.URL, ts.URL + "/"} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		err := run(context.Background(), []string{"health", "-url", u}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "unhealthy") {
			t.Errorf("health -url %s: %v, want the unhealthy /health's 503", u, err)
		}
		mu.Lock()
		if len(asked) != 1 || asked[0] != "/health" {
			t.Errorf("health -url %s asked %v, want /health", u, asked)
		}
		mu.Unlock()
	}
}
