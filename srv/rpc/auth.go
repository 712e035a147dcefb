package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/agentassistant/agentassistant/srv/auth"
)

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
// Two different tokens presented (terr, from auth.TokenFrom) are refused
// as a wrong one is, saying so.
func (a authInterceptor) check(ctx context.Context, tok string, terr error, remote string) error {
	markChecked(ctx)
	if terr != nil || !a.tokens.Valid(tok) {
		a.limiter.Fail(ctx.Done(), remote)
		if terr != nil {
			return connect.NewError(connect.CodeUnauthenticated, terr)
		}
		return connect.NewError(connect.CodeUnauthenticated, errBadToken)
	}
	markValid(ctx)
	return nil
}

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		tok, terr := auth.TokenFrom(req.Any(), req.Header())
		if err := a.check(ctx, tok, terr, req.Peer().Addr); err != nil {
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
		tok, terr := auth.HeaderToken(conn.RequestHeader())
		if err := a.check(ctx, tok, terr, conn.Peer().Addr); err != nil {
			return err
		}
		return next(context.WithValue(ctx, tokenKey{}, tok), conn)
	}
}
