package auth

import (
	"errors"
	"net/http"
	"testing"
)

type carrier string

func (c carrier) GetUserToken() string { return string(c) }

func TestTokenFrom(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name     string
		msg      any
		h        http.Header
		more     []string
		want     string
		conflict bool
	}{
		{"message", carrier("in-msg"), hdr(), nil, "in-msg", false},
		{"message and header agree", carrier("tok"), hdr(TokenHeader, "tok"), nil, "tok", false},
		{"message and header differ", carrier("in-msg"), hdr(TokenHeader, "in-header"), nil, "", true},
		{"empty message token: the header", carrier(""), hdr(TokenHeader, "in-header"), nil, "in-header", false},
		{"header and bearer agree", nil, hdr(TokenHeader, "tok", "Authorization", "Bearer tok"), nil, "tok", false},
		{"header and bearer differ", nil, hdr(TokenHeader, "in-header", "Authorization", "Bearer b"), nil, "", true},
		{"two headers differ", nil, hdr(TokenHeader, "a", TokenHeader, "b"), nil, "", true},
		{"two bearers differ", nil, hdr("Authorization", "Bearer a", "Authorization", "bearer b"), nil, "", true},
		{"query", nil, hdr(), []string{"q"}, "q", false},
		{"query and header differ", nil, hdr(TokenHeader, "h"), []string{"q"}, "", true},
		{"query twice, differing", nil, hdr(), []string{"q", "r"}, "", true},
		{"empty query", nil, hdr(TokenHeader, "h"), []string{""}, "h", false},
		{"bearer", nil, hdr("Authorization", "bEaReR  b-tok "), nil, "b-tok", false},
		{"not bearer", nil, hdr("Authorization", "Basic abc"), nil, "", false},
		{"not bearer beside a header", nil, hdr(TokenHeader, "h", "Authorization", "Basic abc"), nil, "h", false},
		{"bearer alone", nil, hdr("Authorization", "Bearer "), nil, "", false},
		{"nothing", nil, hdr(), nil, "", false},
	} {
		got, err := TokenFrom(c.msg, c.h, c.more...)
		if got != c.want || errors.Is(err, ErrConflictingTokens) != c.conflict || (err != nil && !c.conflict) {
			t.Errorf("%s: %q, %v; want %q, conflict %v", c.name, got, err, c.want, c.conflict)
		}
	}
}
