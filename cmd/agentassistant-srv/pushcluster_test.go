package main

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestPushInClusterMode: Web Push works in cluster mode, every instance
// offering the same key, so that a device subscribed through one is
// pushed to by any.
func TestPushInClusterMode(t *testing.T) {
	ns := natstest.Start(t)
	key := func(u *url.URL) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+"/push/key", nil)
		req.Header.Set("X-Agentassistant-Token", u.Query().Get("token"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /push/key: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	a, b := runServer(t, "-nats-url", ns.URL()), runServer(t, "-nats-url", ns.URL())
	if ka, kb := key(a), key(b); ka != kb || ka == "" {
		t.Fatalf("the instances' keys: %q, %q", ka, kb)
	}
}
