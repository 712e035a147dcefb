package answercap

import (
	"context"
	"errors"
	"strings"
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

// claims is Claims in memory.
type claims struct {
	used map[string]bool
	err  error
}

func (c *claims) Claim(_ context.Context, nonce string, _ time.Time) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	if c.used[nonce] {
		return false, nil
	}
	c.used[nonce] = true
	return true, nil
}

func (c *claims) Release(_ context.Context, nonce string) error {
	if c.err != nil {
		return c.err
	}
	delete(c.used, nonce)
	return nil
}

// TestGivenBackWhenNotSaved: a capability taken for an answer the
// server could not save is good again, in either mode: the tap or
// button may be used again once the store is back.
func TestGivenBackWhenNotSaved(t *testing.T) {
	shared, err := NewShared([]byte("a key of 32 bytes or more, shared"), &claims{used: map[string]bool{}}, func(string) (string, bool) { return "tok", true })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for mode, s := range map[string]*Store{"one server": New(), "cluster": shared} {
		name := s.Make("tok", Cap{Room: "room", Kind: wire.AskQuestion, ID: "q", Expires: now.Add(time.Hour)}, now)
		c, err := s.take(name, now)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		s.giveBack(name, c)
		if _, err := s.take(name, now); err != nil {
			t.Errorf("%s: taken again after it was given back: %v", mode, err)
		}
		if _, err := s.take(name, now); !errors.Is(err, ErrVoid) {
			t.Errorf("%s: a capability taken is used: %v", mode, err)
		}
	}
}

// TestSharedCapabilities: in cluster mode a capability made by one
// instance is taken by another that shares its key, once; one signed
// with another key, altered, expired or of an unknown room is void, and
// one the cluster cannot check is not called void.
func TestSharedCapabilities(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	used := &claims{used: map[string]bool{}}
	tokens := func(room string) (string, bool) { return "tok-" + room, room == "r1" }
	a, err := NewShared(key, used, tokens)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewShared(key, used, tokens)
	now := time.Unix(1_800_000_000, 0)
	c := Cap{Room: "r1", Kind: wire.AskQuestion, ID: "q1", Who: "phone", WhoID: "s1", Door: "push", Expires: now.Add(time.Hour)}
	name := a.Make("tok-r1", c, now)
	if other := a.Make("tok-r1", c, now); other == name {
		t.Fatal("two capabilities share a name")
	}
	got, err := b.take(name, now)
	if err != nil || got.token != "tok-r1" || got.ID != "q1" || got.Kind != wire.AskQuestion || got.Door != "push" || got.WhoID != "s1" {
		t.Fatalf("take on another instance: %+v %v", got, err)
	}
	if _, err := a.take(name, now); !errors.Is(err, ErrVoid) {
		t.Errorf("a capability was good twice: %v", err)
	}
	stranger, _ := NewShared([]byte("another key, also 32 bytes long!"), used, tokens)
	for what, n := range map[string]string{
		"another key's": stranger.Make("tok-r1", c, now),
		"altered":       altered(a.Make("tok-r1", c, now)),
		"expired":       a.Make("tok-r1", Cap{Room: "r1", ID: "q2", Expires: now.Add(-time.Second)}, now),
		"unknown room":  a.Make("tok-r2", Cap{Room: "r2", ID: "q3", Expires: now.Add(time.Hour)}, now),
		"no signature":  "e30",
		"oversized":     strings.Repeat("a", 4096) + "." + "b",
	} {
		if _, err := b.take(n, now); !errors.Is(err, ErrVoid) {
			t.Errorf("%s capability: %v, want ErrVoid", what, err)
		}
	}
	used.err = errors.New("no responders")
	if _, err := b.take(a.Make("tok-r1", c, now), now); err == nil || errors.Is(err, ErrVoid) {
		t.Errorf("a capability the cluster cannot check: %v", err)
	}
	if _, err := NewShared([]byte("short"), used, tokens); err == nil {
		t.Error("a short key was taken")
	}
}

// altered is name with its middle character changed: a replacement of
// one letter, as before, finds none in some names (they are random).
func altered(name string) string {
	b := []byte(name)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
