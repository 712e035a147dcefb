package rpc

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/agentassistant/agentassistant/srv/auth"
)

// tokenCarrier is any request message with a UserToken field, which is how
// existing agentassistant clients authenticate.
type tokenCarrier interface{ GetUserToken() string }

// TokenFrom returns the token a request presents: the message's UserToken
// when it has one, else the X-Agentassistant-Token header, else a bearer
// Authorization header.
func TokenFrom(msg any, h interface{ Get(string) string }) string {
	if tc, ok := msg.(tokenCarrier); ok {
		if t := tc.GetUserToken(); t != "" {
			return t
		}
	}
	return headerToken(h)
}

// headerToken is the token in the X-Agentassistant-Token header, else in
// a bearer Authorization header.
func headerToken(h interface{ Get(string) string }) string {
	if t := h.Get(auth.TokenHeader); t != "" {
		return t
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

type tokenKey struct{}

// tokenOf returns the token the interceptor checked for this call.
func tokenOf(ctx context.Context) string {
	t, _ := ctx.Value(tokenKey{}).(string)
	return t
}

var errBadToken = errors.New("missing or invalid token")

// authInterceptor is the single place every Connect call's token is checked.
type authInterceptor struct {
	tokens  *auth.Tokens
	limiter *auth.Limiter
}

// check is the token check every call goes through. A wrong token's
// answer is held back once the address has spent its budget of failures;
// the right one is never refused or delayed.
func (a authInterceptor) check(ctx context.Context, tok, remote string) error {
	markChecked(ctx)
	if !a.tokens.Valid(tok) {
		a.limiter.Fail(ctx.Done(), remote)
		return connect.NewError(connect.CodeUnauthenticated, errBadToken)
	}
	markValid(ctx)
	return nil
}

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		tok := TokenFrom(req.Any(), req.Header())
		if err := a.check(ctx, tok, req.Peer().Addr); err != nil {
			return nil, err
		}
		return next(context.WithValue(ctx, tokenKey{}, tok), req)
	}
}

func (authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler checks the header token; streaming messages arrive
// after the call starts, so the header is the only thing to check up front.
func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		tok := TokenFrom(nil, conn.RequestHeader())
		if err := a.check(ctx, tok, conn.Peer().Addr); err != nil {
			return err
		}
		return next(context.WithValue(ctx, tokenKey{}, tok), conn)
	}
}
