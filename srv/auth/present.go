package auth

import (
	"errors"
	"net/http"
	"strings"
)

// Header is what TokenFrom reads of a request's headers: http.Header and
// connect's headers both have it.
type Header interface{ Values(string) []string }

// tokenCarrier is any request message with a UserToken field, which is how
// existing agentassistant clients authenticate.
type tokenCarrier interface{ GetUserToken() string }

// ErrConflictingTokens refuses a request that presents different tokens
// in different places (or twice in one): whichever of them won, the
// request would act in a room its client may not have meant, e.g. when a
// proxy adds its own token beside the client's.
var ErrConflictingTokens = errors.New("conflicting tokens: the request presents different tokens " +
	"(in the X-Agentassistant-Token header, an Authorization: Bearer header, ?token= or the message's user_token); present one token")

// TokenFrom returns the token a request presents: in the message's
// UserToken, the X-Agentassistant-Token header, a bearer Authorization
// header, or more (e.g. the ?token= values), wherever it is given. The
// same token in several places is one token; different ones are
// ErrConflictingTokens, and "" is returned with it, which no token
// matches.
func TokenFrom(msg any, h Header, more ...string) (string, error) {
	var tok string
	conflict := false
	add := func(t string) {
		switch {
		case t == "":
		case tok == "":
			tok = t
		case t != tok:
			conflict = true
		}
	}
	if tc, ok := msg.(tokenCarrier); ok {
		add(tc.GetUserToken())
	}
	for _, t := range h.Values(TokenHeader) {
		add(t)
	}
	for _, a := range h.Values("Authorization") {
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			add(strings.TrimSpace(a[7:]))
		}
	}
	for _, t := range more {
		add(t)
	}
	if conflict {
		return "", ErrConflictingTokens
	}
	return tok, nil
}

// HeaderToken is the token in the X-Agentassistant-Token header or a
// bearer Authorization header, as TokenFrom.
func HeaderToken(h Header) (string, error) { return TokenFrom(nil, h) }

// ErrInvalidToken refuses a request that presents no token, or one that
// is not a token of this server.
var ErrInvalidToken = errors.New("missing or invalid token")

// Presented returns the token r presents (as RequestToken) when it is
// valid; else ErrConflictingTokens or ErrInvalidToken.
func (t *Tokens) Presented(r *http.Request) (string, error) {
	tok, err := RequestToken(r)
	if err != nil {
		return "", err
	}
	if !t.Valid(tok) {
		return "", ErrInvalidToken
	}
	return tok, nil
}

// RequestToken is the token of a plain HTTP request: in the
// X-Agentassistant-Token header, a bearer Authorization header or
// ?token=, as TokenFrom.
func RequestToken(r *http.Request) (string, error) {
	return TokenFrom(nil, r.Header, r.URL.Query()["token"]...)
}
