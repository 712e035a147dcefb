package auth

import (
	"encoding/base64"
	"net/http/httptest"
	"testing"
)

// TestPendingKnownLane: an upgrade whose token proved valid waits among
// its token's own: strangers at the cap never evict it, it takes no
// stranger's place, and past perAddr of one token the token's oldest
// goes.
func TestPendingKnownLane(t *testing.T) {
	p := NewPending(2, 2)
	owner := httptest.NewRequest("GET", "/ws", nil)
	owner.RemoteAddr = "127.0.0.1:1"
	owner = owner.WithContext(WithUpgradeToken(owner.Context(), "tok-A"))
	var evicted []string
	ev := func(name string) func() { return func() { evicted = append(evicted, name) } }
	if _, err := p.AcquireUpgrade(owner, ev("owner1")); err != nil {
		t.Fatal(err)
	}
	stranger := httptest.NewRequest("GET", "/ws", nil)
	stranger.RemoteAddr = "127.0.0.1:2"
	for range 10 {
		if _, err := p.AcquireUpgrade(stranger, ev("stranger")); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range evicted {
		if e != "stranger" {
			t.Fatalf("a flood of strangers evicted %s", e)
		}
	}
	if n := p.Len(); n != 2 {
		t.Errorf("%d strangers waiting, want 2: the owner takes none of their places", n)
	}
	evicted = nil
	if _, err := p.AcquireUpgrade(owner, ev("owner2")); err != nil {
		t.Fatal(err)
	}
	release, err := p.AcquireUpgrade(owner, ev("owner3"))
	if err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 1 || evicted[0] != "owner1" {
		t.Errorf("past perAddr of one token: evicted %v, want owner1", evicted)
	}
	release()
	release()
	if p.known.Len() != 1 {
		t.Errorf("%d of the token waiting after a release, want 1", p.known.Len())
	}
}

// TestUpgradeToken: the token of an upgrade in each form it may take,
// the same in two forms being one, different ones a conflict.
func TestUpgradeToken(t *testing.T) {
	proto := TokenProtocol + base64.RawURLEncoding.EncodeToString([]byte("tok-A é"))
	for _, tc := range []struct {
		name, target, header, value, want string
		err                               bool
	}{
		{"none", "/ws", "", "", "", false},
		{"query", "/ws?token=tok-A", "", "", "tok-A", false},
		{"bearer", "/ws", "Authorization", "Bearer tok-A", "tok-A", false},
		{"subprotocol", "/ws", "Sec-WebSocket-Protocol", "agentassistant, " + proto, "tok-A é", false},
		{"other subprotocols only", "/ws", "Sec-WebSocket-Protocol", "chat, agentassistant", "", false},
		{"undecodable", "/ws", "Sec-WebSocket-Protocol", TokenProtocol + "*", "", true},
		{"empty", "/ws", "Sec-WebSocket-Protocol", TokenProtocol, "", true},
		{"conflict", "/ws?token=tok-B", "Sec-WebSocket-Protocol", proto, "", true},
	} {
		r := httptest.NewRequest("GET", tc.target, nil)
		if tc.header != "" {
			r.Header.Set(tc.header, tc.value)
		}
		got, err := UpgradeToken(r)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: %q %v, want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
