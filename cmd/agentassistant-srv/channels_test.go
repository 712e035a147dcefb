package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckChannels: -check-channels sends a test message through each
// channel and says, in words, which failed and why, without its secrets;
// it fails when one did.
func TestCheckChannels(t *testing.T) {
	var got []string
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer ntfy.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook", http.StatusNotFound)
	}))
	defer hook.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.ntfy]\nurl = \"" + ntfy.URL + "\"\ntopic = \"t\"\naccess_token = \"tk_secret_value\"\n" +
		"[channels.webhook]\nurl = \"" + hook.URL + "\"\nsecret = \"a-webhook-secret-value\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 channel(s) failed") {
		t.Fatalf("run: %v", err)
	}
	text := out.String()
	for _, want := range []string{"ntfy: sent", "webhook: FAILED: webhook answered 404: no such hook", "public_url is not set"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"tk_secret_value", "a-webhook-secret-value"} {
		if strings.Contains(text+errOut.String(), secret) {
			t.Errorf("the output shows a secret")
		}
	}
	if len(got) != 1 || got[0] != "Bearer tk_secret_value" {
		t.Errorf("ntfy got %v", got)
	}
}
