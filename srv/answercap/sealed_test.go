package answercap

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// sealedRoom is the room of the token "tok" of sealer's capabilities.
const sealedRoom = "00112233445566778899aabbccddeeff"

// sealer is a cluster's store of capabilities of sealedRoom.
func sealer(t *testing.T) *Store {
	t.Helper()
	s, err := NewShared([]byte("0123456789abcdef0123456789abcdef"), &claims{used: map[string]bool{}}, func(r string) (string, bool) { return "tok", r == sealedRoom })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCapabilityShowsNothingOfItsRoom: a capability travels where
// others read it (an ntfy topic, a webhook's receiver). What it says is
// for the server alone: its room's digest is a hash of the token,
// against which a configured token of a few characters can be guessed
// offline, and its recipient may name a person. Neither can be read
// from its name, however the name is cut and decoded.
func TestCapabilityShowsNothingOfItsRoom(t *testing.T) {
	room, s := sealedRoom, sealer(t)
	now := time.Now()
	name := s.Make("tok", Cap{Room: room, Kind: wire.AskQuestion, ID: "q1", Who: "alice@example.com",
		WhoID: "alice@example.com", Door: "email", Expires: now.Add(time.Hour)}, now)
	roomBytes, _ := hex.DecodeString(room)
	secrets := [][]byte{[]byte(room), roomBytes, []byte("alice@example.com")}
	for _, part := range append(strings.Split(name, "."), name) {
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			b, err := enc.DecodeString(part)
			if err != nil {
				continue
			}
			for _, s := range append(secrets[:0:0], secrets...) {
				if bytes.Contains(b, s) || bytes.Contains([]byte(part), s) {
					t.Errorf("the capability %.16s… shows %q", name, s)
				}
			}
		}
	}
	c, err := s.peek(name, now)
	if err != nil || c.Room != room || c.ID != "q1" || c.WhoID != "alice@example.com" {
		t.Fatalf("the capability opens as %+v, %v", c, err)
	}
	// Altered anywhere, it opens as nothing.
	for i := range name {
		b := []byte(name)
		b[i] ^= 1
		if c, err := s.peek(string(b), now); err == nil {
			t.Fatalf("altered at byte %d, it opens as %+v", i, c)
		}
	}
}

// TestCapabilityOfAnEarlierReleaseAnswers: a button sent before an
// upgrade, signed in the clear as the earlier release made it, still
// opens after it; altered, it does not.
func TestCapabilityOfAnEarlierReleaseAnswers(t *testing.T) {
	room, s := sealedRoom, sealer(t)
	now := time.Now()
	b, _ := json.Marshal(signed{Room: room, Kind: wire.AskQuestion, ID: "q1", Who: "ntfy", WhoID: "ntfy", Door: "ntfy",
		Exp: now.Add(time.Hour).Unix(), Nonce: "n1", Answers: []string{answerSum("Yes")}})
	p := b64.EncodeToString(b)
	name := p + "." + b64.EncodeToString(s.shared.sign(p))
	c, err := s.take(name, now)
	if err != nil || c.ID != "q1" || !c.offers("Yes") || c.offers("No") {
		t.Fatalf("the earlier release's capability opens as %+v, %v", c, err)
	}
	b, _ = json.Marshal(signed{Room: room, Kind: wire.AskQuestion, ID: "q2", Exp: now.Add(time.Hour).Unix(), Nonce: "n2"})
	if c, err := s.peek(b64.EncodeToString(b)+"."+strings.SplitN(name, ".", 2)[1], now); err == nil {
		t.Fatalf("made over into another question, it opens as %+v", c)
	}
}
