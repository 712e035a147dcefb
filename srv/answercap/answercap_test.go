package answercap

import (
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestCapabilities: a capability is good once, void once its question
// settles, dead past its expiry, and names no other question; names are
// unguessable (distinct, 43 base64url characters).
func TestCapabilities(t *testing.T) {
	s := New()
	now := time.Unix(1_800_000_000, 0)
	c := Cap{Room: "r1", Kind: wire.AskQuestion, ID: "q1", Who: "phone", WhoID: "s1", Door: "push", Expires: now.Add(time.Hour)}
	a, b := s.Make("tok", c, now), s.Make("tok", c, now)
	other := s.Make("tok", Cap{Room: "r1", ID: "q2", Expires: now.Add(time.Hour)}, now)
	late := s.Make("tok", Cap{Room: "r1", ID: "q3", Expires: now.Add(time.Minute)}, now)
	if a == b || len(a) != 43 {
		t.Fatalf("names %q, %q", a, b)
	}
	if got, ok := s.Take(a, now); !ok || got.ID != "q1" || got.token != "tok" || got.Door != "push" {
		t.Fatalf("take: %+v %v", got, ok)
	}
	if _, ok := s.Take(a, now); ok {
		t.Error("a capability was good twice")
	}
	s.Void("r1", "q1")
	if _, ok := s.Take(b, now); ok {
		t.Error("a capability of a settled question answered")
	}
	if _, ok := s.Take(late, now.Add(2*time.Minute)); ok {
		t.Error("an expired capability answered")
	}
	if got, ok := s.Take(other, now); !ok || got.ID != "q2" {
		t.Errorf("another question's capability: %+v %v", got, ok)
	}
}
