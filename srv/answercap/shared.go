package answercap

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// Capabilities in cluster mode. An answer may reach any instance, so a
// capability carries what it stands for, sealed with a key every
// instance shares: the instance that takes it need not be the one that
// made it. It is good once: taking it claims its nonce in
// the cluster, and of two takers one wins. It holds no token: the taker
// finds the token of its room among its own.
//
// It is sealed (AES-256-GCM, a key derived from the shared key): it
// travels where others read it (an ntfy topic, a webhook's receiver),
// and what it says is for the server alone: its room's digest is a hash
// of the token, against which a short configured token could be guessed
// offline, and whom it was sent to is none of a reader's business.
// One the release before made, signed in the clear (payload "." HMAC),
// is still taken: a button sent before an upgrade answers after it.

// Claims is where a cluster marks capabilities used.
type Claims interface {
	// Claim marks the capability nonce used until it expires; false when
	// it was already.
	Claim(ctx context.Context, nonce string, until time.Time) (bool, error)
	// Release forgets the claim of nonce: its answer was not saved.
	Release(ctx context.Context, nonce string) error
}

// NewShared returns a store for cluster mode: key (32 bytes or more, the
// same on every instance) signs the capabilities, claims makes each good
// once, token finds a room's token.
func NewShared(key []byte, claims Claims, token func(room string) (string, bool)) (*Store, error) {
	if len(key) < 32 {
		return nil, errors.New("answercap: the signing key is shorter than 32 bytes")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("agentassistant capability seal"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("answercap: %w", err)
	}
	seal, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("answercap: %w", err)
	}
	l := hmac.New(sha256.New, key)
	l.Write([]byte("agentassistant label"))
	return &Store{shared: &signer{key: key, seal: seal, claims: claims, token: token}, label: l.Sum(nil)}, nil
}

type signer struct {
	key    []byte
	seal   cipher.AEAD
	claims Claims
	token  func(room string) (string, bool)
}

// signed is what a cluster's capability says.
type signed struct {
	Room  string    `json:"r"`
	Kind  wire.Kind `json:"k"`
	ID    string    `json:"i"`
	Who   string    `json:"w"`
	WhoID string    `json:"u"`
	Door  string    `json:"d"`
	Exp   int64     `json:"e"`
	Nonce string    `json:"n"`
	// Of: Cap.Of, base64url; the question's Digest in one the release
	// before made (hub.Reply.Of says what that still answers); none in
	// one made by a build older than that, which is refused (open).
	Of string `json:"o,omitempty"`
	// Answers: null for any text, else the digests of the only ones
	// (Cap.Answers, answerSum): the texts themselves, written by JSON
	// (a "<" in six bytes), could take a name past maxSigned.
	Answers []string `json:"a"`
}

// answerSum is what a signed capability holds of an answer it offers.
func answerSum(text string) string {
	d := sha256.Sum256([]byte(text))
	return b64.EncodeToString(d[:16])
}

// maxSigned bounds a capability's name: what is read before the check.
const maxSigned = 2048

// claimTimeout bounds the claim of one capability.
const claimTimeout = 5 * time.Second

// ErrUnsure: the cluster could not say whether the capability was used;
// it may be tried again.
var ErrUnsure = errors.New("the capability cannot be checked now")

var b64 = base64.RawURLEncoding

// unseal is what the capability named says, checked: sealed, or signed
// in the clear by an earlier release.
func (g *signer) unseal(name string) ([]byte, error) {
	p, sig, signed := strings.Cut(name, ".")
	if !signed {
		b, err := b64.Strict().DecodeString(name)
		if err != nil {
			return nil, err
		}
		return g.seal.Open(nil, nil, b, nil)
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, g.sign(p)) {
		return nil, ErrVoid
	}
	return b64.DecodeString(p)
}

func (g *signer) sign(payload string) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func (g *signer) make(c Cap) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	var sums []string
	if c.Answers != nil {
		sums = make([]string, len(c.Answers))
		for i, a := range c.Answers {
			sums[i] = answerSum(a)
		}
	}
	b, _ := json.Marshal(signed{Room: c.Room, Kind: c.Kind, ID: c.ID, Who: c.Who, WhoID: c.WhoID, Door: c.Door,
		Exp: c.Expires.Unix(), Nonce: b64.EncodeToString(nonce), Answers: sums, Of: b64.EncodeToString(c.Of[:])})
	return b64.EncodeToString(g.seal.Seal(nil, nil, b, nil)) // #nosec G407 -- NewGCMWithRandomNonce draws a nonce of its own for each seal
}

func (g *signer) take(name string, now time.Time) (*Cap, error) {
	c, nonce, err := g.open(name, now)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	won, err := g.claims.Claim(ctx, nonce, c.Expires)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnsure, err)
	case !won:
		return nil, ErrVoid
	}
	return c, nil
}

// release forgets the claim of the capability named, within
// claimTimeout; a claim that cannot be forgotten leaves it used.
func (g *signer) release(name string) {
	_, nonce, err := g.open(name, time.Time{})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	_ = g.claims.Release(ctx, nonce)
}

// open checks the capability named, unexpired, of a room of ours, and
// says what it stands for and its nonce, without claiming it.
func (g *signer) open(name string, now time.Time) (*Cap, string, error) {
	if len(name) > maxSigned {
		return nil, "", ErrVoid
	}
	b, err := g.unseal(name)
	var sd signed
	if err != nil || json.Unmarshal(b, &sd) != nil {
		return nil, "", ErrVoid
	}
	exp := time.Unix(sd.Exp, 0)
	tok, ok := g.token(sd.Room)
	// One that names no question (a build older than the release
	// before) would answer whichever its ID names now, asked since.
	var of [sha256.Size]byte
	d, err := b64.DecodeString(sd.Of)
	ok = ok && err == nil && len(d) == len(of)
	copy(of[:], d)
	if now.After(exp) || !ok || sd.Nonce == "" {
		return nil, "", ErrVoid
	}
	return &Cap{token: tok, Room: sd.Room, Kind: sd.Kind, ID: sd.ID, Who: sd.Who, WhoID: sd.WhoID, Door: sd.Door, Expires: exp, sums: sd.Answers, Of: of}, sd.Nonce, nil
}
