package failover

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

func serve(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name+" "+r.Host)
	}))
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client) (string, error) {
	t.Helper()
	resp, err := c.Get("http://cluster/x")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestMovesOnAfterAFailure: calls go to one server until it fails; the
// call that failed is the caller's to repeat, and the next goes to the
// next server, with that server's Host.
func TestMovesOnAfterAFailure(t *testing.T) {
	a, b := serve(t, "a"), serve(t, "b")
	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	rt := New([]string{ua.Host, ub.Host}, http.DefaultTransport)
	c := &http.Client{Transport: rt}
	for range 3 {
		if got, err := get(t, c); err != nil || got != "a "+ua.Host {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	a.Close()
	if _, err := get(t, c); err == nil {
		t.Fatal("a call to the closed server succeeded")
	}
	if got, err := get(t, c); err != nil || got != "b "+ub.Host {
		t.Fatalf("after a failed: %q, %v", got, err)
	}
	if rt.Current() != ub.Host {
		t.Fatalf("current = %s", rt.Current())
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(" 10.0.0.1:22080 , srv-b:22081,10.0.0.3", 22080)
	if err != nil || len(got) != 3 || got[0] != "10.0.0.1:22080" || got[1] != "srv-b:22081" || got[2] != "10.0.0.3:22080" {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	if _, err := Parse("a:1,,", 1); err == nil {
		t.Fatal("an empty address was taken")
	}
}

// TestMovesOnAfterUnavailable: a server that answers 503 (Connect's
// Unavailable: it lost the cluster's NATS, or it is shutting down) is
// left for the next one as a failed call is; its answer is the caller's.
func TestMovesOnAfterUnavailable(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the cluster's NATS is unreachable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(a.Close)
	b := serve(t, "b")
	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	rt := New([]string{ua.Host, ub.Host}, http.DefaultTransport)
	c := &http.Client{Transport: rt}
	resp, err := c.Get("http://cluster/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if got, err := get(t, c); err != nil || got != "b "+ub.Host {
		t.Fatalf("after a's 503: %q, %v", got, err)
	}
}
