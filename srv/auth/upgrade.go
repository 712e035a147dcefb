package auth

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
)

// TokenProtocol begins the WebSocket subprotocol that carries a token in
// an upgrade, base64url-encoded without padding after it
// ("agentassistant.bearer.<token>"): a browser can set no header on a
// WebSocket, and a URL's query is kept in more places than a header. A
// client offering it offers the plain subprotocol too (wsconn.Subprotocol),
// which the server selects, so the token is never sent back.
const TokenProtocol = "agentassistant.bearer."

// UpgradeToken returns the token a WebSocket upgrade presents before its
// first frame, as TokenFrom: in the X-Agentassistant-Token header, a
// bearer Authorization header, ?token= or a TokenProtocol subprotocol;
// "" when it presents none. A TokenProtocol that does not decode is
// ErrInvalidToken.
func UpgradeToken(r *http.Request) (string, error) {
	more := r.URL.Query()["token"]
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), TokenProtocol)
			if !ok {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || len(b) == 0 {
				return "", ErrInvalidToken
			}
			more = append(more, string(b))
		}
	}
	return TokenFrom(nil, r.Header, more...)
}

type upgradeTokenKey struct{}

// WithUpgradeToken marks ctx as an upgrade's whose token, tok, has proved
// valid before the upgrade.
func WithUpgradeToken(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, upgradeTokenKey{}, tok)
}

// UpgradeTokenOf is the valid token WithUpgradeToken marked ctx with, or "".
func UpgradeTokenOf(ctx context.Context) string {
	tok, _ := ctx.Value(upgradeTokenKey{}).(string)
	return tok
}
