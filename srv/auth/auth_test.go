package auth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokensValid(t *testing.T) {
	toks, err := NewTokens("correct-horse-battery", "second-token-xyz")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok  string
		want bool
	}{
		{"correct-horse-battery", true},
		{"second-token-xyz", true},
		{"", false},
		{"correct-horse-batter", false},   // truncated
		{"correct-horse-battery!", false}, // one more
		{"CORRECT-HORSE-BATTERY", false},
		{strings.Repeat("x", 10000), false}, // over-long
		{"correct-horse-battery\x00", false},
	} {
		if got := toks.Valid(tc.tok); got != tc.want {
			t.Errorf("Valid(%.30q) = %v, want %v", tc.tok, got, tc.want)
		}
	}
	if _, err := NewTokens(""); err == nil {
		t.Error("NewTokens with no token succeeded")
	}
	if _, err := NewTokens("short"); err == nil {
		t.Error("NewTokens accepted a 5-character token")
	}
}

func TestGenerateAndPersist(t *testing.T) {
	a, b := Generate(), Generate()
	if a == b || len(a) < 32 {
		t.Fatalf("Generate gave %q and %q", a, b)
	}
	dir := filepath.Join(t.TempDir(), "data")
	tok, created, err := LoadOrCreate(dir)
	if err != nil || !created {
		t.Fatalf("LoadOrCreate: %q %v %v", tok, created, err)
	}
	st, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	again, created, err := LoadOrCreate(dir)
	if err != nil || created || again != tok {
		t.Fatalf("second LoadOrCreate: %q %v %v, want %q", again, created, err, tok)
	}
}

func TestHostAllowed(t *testing.T) {
	g := &Guard{Hosts: []string{"box.lan", "192.168.1.20", "2001:db8::1"}}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"192.168.1.20:22080", true}, // an allowed address, as allowed_hosts says
		{"[2001:db8::1]:22080", true},
		{"192.168.1.21:22080", false},
		{"192.168.001.020:22080", false},
		{"127.0.0.1:22080", true},
		{"127.0.0.1", true},
		{"127.1.2.3:80", true},
		{"localhost:22080", true},
		{"LocalHost:22080", true},
		{"[::1]:22080", true},
		{"[::1]", true},
		{"box.lan:22080", true},
		{"BOX.lan", true},
		{"", false},
		{"evil.example:22080", false},
		{"localhost.:22080", false},
		{"localhost.evil.com", false},
		{"0177.0.0.1:22080", false},
		{"2130706433:22080", false},
		{"0x7f.0.0.1", false},
		{"10.0.0.1:22080", false},
		{"[::ffff:127.0.0.1]:1", true}, // IPv4-mapped loopback is loopback
	} {
		if got := g.HostAllowed(tc.host); got != tc.want {
			t.Errorf("HostAllowed(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	g := &Guard{Origins: []string{"http://localhost:5173"}}
	for _, tc := range []struct {
		host, origin string
		want         bool
	}{
		{"127.0.0.1:22080", "", true},
		{"127.0.0.1:22080", "http://127.0.0.1:22080", true},
		{"localhost:22080", "http://localhost:22080", true},
		{"127.0.0.1:22080", "http://localhost:5173", true},
		{"127.0.0.1:22080", "null", false},
		{"127.0.0.1:22080", "http://localhost.evil.com", false},
		{"127.0.0.1:22080", "http://127.0.0.1:9999", false},
		{"127.0.0.1:22080", "https://evil.example", false},
		{"127.0.0.1:22080", "file://", false},
		{"evil.example:22080", "http://evil.example:22080", false},
	} {
		r := httptest.NewRequest("GET", "/ws", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := g.OriginAllowed(r); got != tc.want {
			t.Errorf("OriginAllowed(host %q, origin %q) = %v, want %v", tc.host, tc.origin, got, tc.want)
		}
	}
	// More than one Origin header: refused, whatever the values.
	for _, origins := range [][]string{
		{"http://127.0.0.1:22080", "http://127.0.0.1:22080"},
		{"http://127.0.0.1:22080", "http://evil.example"},
		{"http://localhost:5173", ""},
	} {
		r := httptest.NewRequest("GET", "/ws", nil)
		r.Host = "127.0.0.1:22080"
		r.Header["Origin"] = origins
		if g.OriginAllowed(r) {
			t.Errorf("OriginAllowed(origins %q) = true", origins)
		}
	}
}

// TestNilGuardIsTheZeroGuard: a door given no Guard checks as the zero
// one does (loopback names only), rather than failing.
func TestNilGuardIsTheZeroGuard(t *testing.T) {
	var g *Guard
	r, _ := http.NewRequest("GET", "http://127.0.0.1:22080/ws", nil)
	r.Header.Set("Origin", "http://evil.example")
	if g.OriginAllowed(r) || !g.HostAllowed("localhost:22080") || g.HostAllowed("evil.example") {
		t.Error("a nil Guard does not check as the zero Guard")
	}
	r.Header.Set("Origin", "http://127.0.0.1:22080")
	if !g.OriginAllowed(r) {
		t.Error("a nil Guard refuses the server's own page")
	}
}
