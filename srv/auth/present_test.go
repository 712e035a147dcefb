package auth

import (
	"net/http"
	"testing"
)

type carrier string

func (c carrier) GetUserToken() string { return string(c) }

func TestTokenFrom(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name string
		msg  any
		h    http.Header
		want string
	}{
		{"message first", carrier("in-msg"), hdr(TokenHeader, "in-header"), "in-msg"},
		{"empty message token: the header", carrier(""), hdr(TokenHeader, "in-header"), "in-header"},
		{"no carrier", nil, hdr(TokenHeader, "in-header", "Authorization", "Bearer b"), "in-header"},
		{"bearer", nil, hdr("Authorization", "bEaReR  b-tok "), "b-tok"},
		{"not bearer", nil, hdr("Authorization", "Basic abc"), ""},
		{"bearer alone", nil, hdr("Authorization", "Bearer "), ""},
		{"nothing", nil, hdr(), ""},
	} {
		if got := TokenFrom(c.msg, c.h); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
