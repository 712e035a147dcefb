package failover

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
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
	rt := New("http", []string{ua.Host, ub.Host}, http.DefaultTransport)
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
	got, scheme, err := Parse(" 10.0.0.1:22080 , srv-b:22081,10.0.0.3", 22080)
	if err != nil || scheme != "http" || len(got) != 3 || got[0] != "10.0.0.1:22080" || got[1] != "srv-b:22081" || got[2] != "10.0.0.3:22080" {
		t.Fatalf("Parse = %v, %q, %v", got, scheme, err)
	}
	if _, _, err := Parse("a:1,,", 1); err == nil {
		t.Fatal("an empty address was taken")
	}
}

// TestParseURLs: a server behind HTTPS (its own -tls-cert, or a reverse
// proxy) is named by its URL; one written with a scheme is read as one,
// not as a host name "https" or "http://x" (which no server has), and a
// URL without a port has its scheme's. The list has one scheme.
func TestParseURLs(t *testing.T) {
	for _, tc := range []struct {
		list, scheme string
		addrs        []string
	}{
		{"https://inbox.example.org", "https", []string{"inbox.example.org:443"}},
		{"https://10.0.0.1:22080/, https://10.0.0.2:22080", "https", []string{"10.0.0.1:22080", "10.0.0.2:22080"}},
		{"http://srv1:22080,srv2", "http", []string{"srv1:22080", "srv2:22080"}},
		{"https://[::1]:8443", "https", []string{"[::1]:8443"}},
		{"HTTPS://Box.lan", "https", []string{"Box.lan:443"}},
	} {
		addrs, scheme, err := Parse(tc.list, 22080)
		if err != nil || scheme != tc.scheme || strings.Join(addrs, " ") != strings.Join(tc.addrs, " ") {
			t.Errorf("Parse(%q) = %v, %q, %v; want %v, %q", tc.list, addrs, scheme, err, tc.addrs, tc.scheme)
		}
	}
	for _, list := range []string{
		"https://a:1,http://b:2", // one scheme for all
		"https://a:1,b:2",        // b would be http
		"ftp://a:1",
		"https://a:1/mcp", // the server's address, not one of its paths
		"https://user@a:1",
		"https://a:1?x=1",
	} {
		if addrs, scheme, err := Parse(list, 22080); err == nil {
			t.Errorf("Parse(%q) = %v, %q; want an error", list, addrs, scheme)
		}
	}
}

// TestHTTPS: with the scheme https, calls and probes go to the server
// over TLS, whatever scheme the caller's URL names.
func TestHTTPS(t *testing.T) {
	a := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "tls "+r.Host)
	}))
	t.Cleanup(a.Close)
	ua, _ := url.Parse(a.URL)
	rt := New("https", []string{ua.Host}, a.Client().Transport)
	if got, err := get(t, &http.Client{Transport: rt}); err != nil || got != "tls "+ua.Host {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := rt.Probe(t.Context(), 5*time.Second, nil); err != nil {
		t.Fatalf("probe: %v", err)
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
	rt := New("http", []string{ua.Host, ub.Host}, http.DefaultTransport)
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

// TestParsePorts: a server's port is a number from 1 to 65535 and it
// has a host; one mistyped ("srv1:2208O", a port of 0, no host) is
// refused where it is written, saying so, not tried call after call.
func TestParsePorts(t *testing.T) {
	for list, want := range map[string]string{
		"srv1:abc": "port", "srv1:2208O": "port", "srv1:0": "port", "srv1:65536": "port",
		"srv1:22080,srv2:-1": "port", "[::1]:x": "port", ":22080": "host", "http://:22080": "host",
	} {
		if addrs, _, err := Parse(list, 22080); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, %v; want an error about its %s", list, addrs, err, want)
		}
	}
	for _, list := range []string{"srv1:1", "srv1:65535", "[::1]:22080", "http://srv1:8080"} {
		if _, _, err := Parse(list, 22080); err != nil {
			t.Errorf("Parse(%q): %v", list, err)
		}
	}
}
