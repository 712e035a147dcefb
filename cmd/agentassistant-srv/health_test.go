package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
