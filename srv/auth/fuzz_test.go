package auth

import (
	"net"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzGuard: the Host check accepts only loopback names and addresses and
// the configured names; the Origin check only the same origin.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{"127.0.0.1:22080", "localhost", "[::1]:1", "evil.example", "localhost.", "0177.0.0.1",
		"127.0.0.1.nip.io", "LOCALHOST:80", "[::ffff:127.0.0.1]:1", "box.lan:9", "", ":", "[", "127.0.0.1:22080:1", "%00"} {
		f.Add(s, "http://"+s)
	}
	g := &Guard{Hosts: []string{"box.lan"}}
	f.Fuzz(func(t *testing.T, host, origin string) {
		if g.HostAllowed(host) {
			h := host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				h = hh
			}
			h = strings.Trim(h, "[]")
			ip := net.ParseIP(h)
			if !strings.EqualFold(h, "localhost") && !strings.EqualFold(h, "box.lan") && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("allowed Host %q", host)
			}
		}
		r := httptest.NewRequest("GET", "/ws", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		if origin != "" && g.OriginAllowed(r) {
			if !strings.EqualFold(origin, "http://"+host) || !g.HostAllowed(host) {
				t.Fatalf("allowed Origin %q for Host %q", origin, host)
			}
		}
	})
}
