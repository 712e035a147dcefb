// Package auth holds the server's tokens and the request guards that keep
// other sites and other tokens out.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tokens is the set of tokens the server accepts. Each token is a room:
// clients and requests under one token never see another's.
type Tokens struct {
	// digests of the accepted tokens; comparing fixed-size digests keeps the
	// comparison constant-time whatever the length of the candidate.
	digests [][sha256.Size]byte
}

// NewTokens returns a set that accepts exactly the given non-empty tokens.
func NewTokens(tokens ...string) (*Tokens, error) {
	t := &Tokens{}
	for _, tok := range tokens {
		if tok == "" {
			continue
		}
		if err := Check(tok); err != nil {
			return nil, err
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(tok)))
	}
	if len(t.digests) == 0 {
		return nil, errors.New("no token configured")
	}
	return t, nil
}

// Valid reports whether tok is one of the accepted tokens. It compares
// against every token so the time taken says nothing about which matched.
func (t *Tokens) Valid(tok string) bool {
	if tok == "" || len(tok) > MaxLen {
		return false
	}
	d := sha256.Sum256([]byte(tok))
	ok := 0
	for i := range t.digests {
		ok |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	return ok == 1
}

// TokenHeader carries the token on HTTP requests whose messages have no
// UserToken field (our newer Connect services, status endpoints).
const TokenHeader = "X-Agentassistant-Token"

// MaxLen bounds a token's length; anything longer is rejected unread.
const MaxLen = 256

// Check reports whether tok is acceptable as a configured token.
func Check(tok string) error {
	switch {
	case len(tok) < 8:
		return errors.New("token too short: use at least 8 characters")
	case len(tok) > MaxLen:
		return fmt.Errorf("token too long: at most %d characters", MaxLen)
	case strings.ContainsAny(tok, " \t\r\n"):
		return errors.New("token must not contain white space")
	case strings.IndexFunc(tok, func(r rune) bool { return r < '!' || r > '~' }) >= 0:
		// A header carries no control character, and a browser sends
		// a header's other characters as Latin-1, not UTF-8.
		return errors.New("token must be printable ASCII: letters, digits and punctuation")
	}
	return nil
}

// Generate returns a new random token carrying 192 bits from crypto/rand,
// URL-safe so it can sit in ?token= unescaped.
func Generate() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// TokenFile is the name of the file, inside the data directory, that keeps
// the generated token across restarts.
const TokenFile = "token"

// LoadOrCreate returns the token kept in dir, generating and saving one
// (mode 0600) when there is none yet.
func LoadOrCreate(dir string) (tok string, created bool, err error) {
	path := filepath.Join(dir, TokenFile)
	tok, err = Load(dir)
	if err == nil {
		return tok, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("create data directory: %w", err)
	}
	tok = Generate()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- the operator's data directory
	if errors.Is(err, os.ErrExist) {                                      // another process won the race
		tok, err = Load(dir)
		return tok, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("create token file: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		_ = f.Close()
		return "", false, fmt.Errorf("write token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("write token file: %w", err)
	}
	return tok, true, nil
}

// Load reads the token kept in dir.
func Load(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, TokenFile)) // #nosec G304 -- the operator's data directory
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if err := Check(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", filepath.Join(dir, TokenFile), err)
	}
	return tok, nil
}
