package answercap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestLocalCapabilityOutlivesTheProcess: a capability made before a
// restart (the key read again from the data directory, the claims
// forgotten) is still good after it; one made with another key is not.
func TestLocalCapabilityOutlivesTheProcess(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	rooms := func(room string) (string, bool) { return "token-of-" + room, room == "r1" }
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, KeyFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	before, err := NewShared(key, NewMemoryClaims(func() time.Time { return now }), rooms)
	if err != nil {
		t.Fatal(err)
	}
	name := before.Make("token-of-r1", Cap{Room: "r1", Kind: wire.AskQuestion, ID: "q1", Door: "ntfy", Expires: now.Add(time.Hour)}, now)

	again, err := LoadOrCreateKey(dir)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("the key read again differs: %v", err)
	}
	after, err := NewShared(again, NewMemoryClaims(func() time.Time { return now }), rooms)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := after.Take(name, now)
	if !ok || c.ID != "q1" || c.token != "token-of-r1" {
		t.Fatalf("after the restart: %+v %v", c, ok)
	}
	if _, ok := after.Take(name, now); ok {
		t.Error("taken twice in one process")
	}
	other, _ := NewShared(bytes.Repeat([]byte{7}, 32), NewMemoryClaims(nil), rooms)
	if _, ok := other.Take(name, now); ok {
		t.Error("taken with another key")
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFileName), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(dir); err == nil {
		t.Error("a damaged key file was read")
	}
}

// TestMemoryClaimsBounded: at maxCaps claims the expired go first, then
// the one to expire first; a released claim is made again.
func TestMemoryClaimsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := NewMemoryClaims(func() time.Time { return now })
	ctx := context.Background()
	if ok, _ := c.Claim(ctx, "old", now.Add(-time.Second)); !ok {
		t.Fatal("claim")
	}
	if ok, _ := c.Claim(ctx, "old", now.Add(time.Hour)); !ok {
		t.Fatal("an expired claim was not made again")
	}
	if ok, _ := c.Claim(ctx, "old", now.Add(time.Hour)); ok {
		t.Fatal("claimed twice")
	}
	_ = c.Release(ctx, "old")
	if ok, _ := c.Claim(ctx, "old", now.Add(time.Minute)); !ok {
		t.Fatal("a released claim was not made again")
	}
	for i := range maxCaps {
		c.Claim(ctx, strconv.Itoa(i), now.Add(time.Hour+time.Duration(i)))
	}
	if len(c.m) != maxCaps {
		t.Fatalf("%d claims, want %d", len(c.m), maxCaps)
	}
	if ok, _ := c.Claim(ctx, "old", now.Add(time.Hour)); !ok {
		t.Error("the claim to expire first was kept past the bound")
	}
}
