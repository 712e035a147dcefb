package auth

import "strings"

// Header is what TokenFrom reads of a request's headers: http.Header and
// connect's headers both have it.
type Header interface{ Get(string) string }

// tokenCarrier is any request message with a UserToken field, which is how
// existing agentassistant clients authenticate.
type tokenCarrier interface{ GetUserToken() string }

// TokenFrom returns the token a request presents: the message's UserToken
// when it has one, else the X-Agentassistant-Token header, else a bearer
// Authorization header.
func TokenFrom(msg any, h Header) string {
	if tc, ok := msg.(tokenCarrier); ok {
		if t := tc.GetUserToken(); t != "" {
			return t
		}
	}
	return HeaderToken(h)
}

// HeaderToken is the token in the X-Agentassistant-Token header, else in
// a bearer Authorization header.
func HeaderToken(h Header) string {
	if t := h.Get(TokenHeader); t != "" {
		return t
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}
