package answercap

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
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
// upgrade, signed in the clear as the release before made it (naming
// its question), still opens after it; altered, it does not.
func TestCapabilityOfAnEarlierReleaseAnswers(t *testing.T) {
	room, s := sealedRoom, sealer(t)
	now := time.Now()
	of := wire.Digest(wire.AskQuestion, "", "Deploy?")
	b, _ := json.Marshal(signed{Room: room, Kind: wire.AskQuestion, ID: "q1", Who: "ntfy", WhoID: "ntfy", Door: "ntfy",
		Exp: now.Add(time.Hour).Unix(), Nonce: "n1", Answers: []string{answerSum("Yes")}, Of: b64.EncodeToString(of[:])})
	p := b64.EncodeToString(b)
	name := p + "." + b64.EncodeToString(s.shared.sign(p))
	c, err := s.take(name, now)
	if err != nil || c.ID != "q1" || c.Of != of || !c.offers("Yes") || c.offers("No") {
		t.Fatalf("the earlier release's capability opens as %+v, %v", c, err)
	}
	b, _ = json.Marshal(signed{Room: room, Kind: wire.AskQuestion, ID: "q2", Exp: now.Add(time.Hour).Unix(), Nonce: "n2"})
	if c, err := s.peek(b64.EncodeToString(b)+"."+strings.SplitN(name, ".", 2)[1], now); err == nil {
		t.Fatalf("made over into another question, it opens as %+v", c)
	}
}

// TestCapabilityNamingNoQuestionAnswersNone: an agent may ask again under
// an ID it used before. A capability signed in the clear by a build
// older than the release before, which did not name its question (Of),
// would answer whichever question its ID names now: a button of
// "Drop the staging database?" would drop production. It is refused
// (the person answers in the app); the release before named its
// question, and its buttons answer that one alone.
func TestCapabilityNamingNoQuestionAnswersNone(t *testing.T) {
	s := sealer(t)
	h := hub.New(hub.Options{})
	defer h.Close()
	asked := make(chan *hub.Reply, 1)
	prod := hub.Request{Kind: wire.AskQuestion, ID: "drop-db", Text: "Drop the production database?", Timeout: time.Hour,
		Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Yes"}, {Label: "No"}}}}}
	go func() {
		rep, _ := h.Ask(context.Background(), "tok", prod)
		asked <- rep
	}()
	waitPending(t, h, "drop-db")
	now := time.Now()
	old := func(of string, nonce string) string {
		b, _ := json.Marshal(signed{Room: sealedRoom, Kind: wire.AskQuestion, ID: "drop-db", Who: "ntfy", WhoID: "ntfy", Door: "ntfy",
			Exp: now.Add(time.Hour).Unix(), Nonce: nonce, Answers: []string{answerSum("Yes"), answerSum("No")}, Of: of})
		p := b64.EncodeToString(b)
		return p + "." + b64.EncodeToString(s.shared.sign(p))
	}
	if _, err := s.Use(context.Background(), h, old("", "n1"), "Yes", now); !errors.Is(err, ErrVoid) {
		t.Fatalf("a button naming no question answered the one its ID names now: %v", err)
	}
	staging := wire.Digest(wire.AskQuestion, "", "Drop the staging database?")
	if _, err := s.Use(context.Background(), h, old(b64.EncodeToString(staging[:]), "n2"), "Yes", now); err == nil {
		t.Fatal("the staging question's button answered the production question")
	}
	// The release before named it by its text alone: its button answers
	// the question of that text as it did there, until it expires
	// (srv/hub TestCapabilityAnswersWhatItsQuestionShowed).
	d := prod.Digest()
	if _, err := s.Use(context.Background(), h, old(b64.EncodeToString(d[:]), "n3"), "No", now); err != nil {
		t.Fatalf("the release before's button of the question: %v", err)
	}
	if rep := <-asked; rep == nil || rep.Contents[0].GetText().GetText() != "No" {
		t.Fatalf("the agent got %v", rep)
	}
}
