package rpc

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/agentassistant/agentassistant/srv/auth"
)

// preauth bounds what a Connect call may cost before its token is
// checked. connect-go reads and decompresses a unary request's message
// before any interceptor sees it, so preauth sorts a call before
// connect-go reads a byte of its body: one whose header carries a valid
// token goes to the full handler, which reads messages up to MaxMessage;
// every other one goes to the small handler, which refuses a wrong header
// token before reading anything (connect's request gate) and reads at
// most MaxUnauthMessage, compressed or not. Older clients that send the
// token only inside the message keep working for messages up to that
// size. Both handlers decompress through a gzip reader that stops at
// their limit, rather than inflating a bomb to the end to report its size.
//
// A call sorted to the small handler is unauthenticated until its token
// has been found valid, and may hold up to MaxUnauthMessage meanwhile: it
// takes a place among the connections waiting to log in (Pending, shared
// with the WebSockets), or is refused before a byte of its body is read.
type preauth struct {
	full, small http.Handler
	a           authInterceptor
	smallMax    int // bytes of body the small handler reads
	pending     *auth.Pending
	guard       *auth.Guard // nil: loopback names only
}

// errForbiddenOrigin refuses a browser's call from another site: a page
// may send a request to 127.0.0.1 without reading its answer, and a call
// acts (defence in depth; the token is needed as well).
var errForbiddenOrigin = errors.New("forbidden origin: this server answers pages of its own origin only")

func (p *preauth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.guard.OriginAllowed(r) {
		w.Header().Set("Connection", "close") // the body is not read
		_ = connect.NewErrorWriter().Write(w, r, connect.NewError(connect.CodePermissionDenied, errForbiddenOrigin))
		return
	}
	if tok, err := auth.HeaderToken(r.Header); err == nil && tok != "" && p.a.tokens.Valid(tok) {
		r.Body = &callBody{ReadCloser: r.Body}
		p.full.ServeHTTP(w, r)
		return
	}
	// Evicted while still unauthenticated (the cap needed its place): the
	// call ends, and a body still trickling in stops being waited for.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	body := &callBody{small: p.smallMax}
	release, err := p.pending.Acquire(r.RemoteAddr, func() {
		body.evicted.Store(true)
		cancel()
		_ = rc.SetReadDeadline(time.Now())
	})
	if err != nil {
		code := connect.CodeUnavailable
		if errors.Is(err, auth.ErrPendingAddr) {
			code = connect.CodeResourceExhausted
		}
		w.Header().Set("Retry-After", "1")
		// Answer now and close, rather than read the body the refusal
		// is about to the end first.
		w.Header().Set("Connection", "close")
		_ = connect.NewErrorWriter().Write(w, r, connect.NewError(code, err))
		return
	}
	defer release()
	st := &callState{release: release}
	r = r.WithContext(context.WithValue(ctx, callStateKey{}, st))
	body.ReadCloser = http.MaxBytesReader(w, r.Body, int64(p.smallMax))
	r.Body = body
	cw := &countingWriter{ResponseWriter: w, answer: func() {
		if !st.checked.Load() {
			// Refused before its token could be read (too big, malformed,
			// badly compressed): it counts as a failed login all the
			// same, before the client hears of it.
			p.a.limiter.Failed(r.RemoteAddr)
		}
	}}
	p.small.ServeHTTP(cw, r)
	cw.once.Do(cw.answer)
}

// countingWriter runs answer once, before the first byte of the response.
type countingWriter struct {
	http.ResponseWriter
	answer func()
	once   sync.Once
}

func (w *countingWriter) WriteHeader(code int) {
	w.once.Do(w.answer)
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.once.Do(w.answer)
	return w.ResponseWriter.Write(b)
}

func (w *countingWriter) Flush() {
	w.once.Do(w.answer)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// callState tells ServeHTTP whether the token check ran, and gives the
// call's place among the unauthenticated back once its token is valid.
type callState struct {
	checked atomic.Bool
	release func()
}

type callStateKey struct{}

func markChecked(ctx context.Context) {
	if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
		st.checked.Store(true)
	}
}

// markValid gives the place of a call whose token proved valid back: it
// is authenticated, and may wait for its answer as long as it takes.
func markValid(ctx context.Context) {
	if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
		st.release()
	}
}

// gate refuses a wrong header token, or two different ones, before the
// message is read.
func (a authInterceptor) gate(ctx context.Context, _ connect.Spec, peer connect.Peer, h http.Header) (context.Context, error) {
	if tok, err := auth.HeaderToken(h); tok != "" || err != nil {
		return nil, a.check(ctx, tok, err, peer.Addr)
	}
	return nil, nil
}

// callBody gives the two ways a body read can fail a Connect error of
// their own, which connect-go passes on as it is.
type callBody struct {
	io.ReadCloser
	small   int         // > 0: the limit of a call without a header token
	evicted atomic.Bool // its place among the unauthenticated was needed
}

func (b *callBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil || errors.Is(err, io.EOF):
	case b.small > 0 && errors.As(err, &tooBig):
		err = connect.NewError(connect.CodeResourceExhausted, errNeedsHeader(b.small))
	case errors.Is(err, os.ErrDeadlineExceeded) && b.evicted.Load():
		err = connect.NewError(connect.CodeUnavailable, errors.New(auth.ErrPendingFull.Error()+" (this call's place was given to a newer one)"))
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request body did not arrive in time"))
	}
	return n, err
}

// errNeedsHeader names the setting too: an older client cannot send the
// header, but the server's owner can raise the limit for it.
func errNeedsHeader(max int) error {
	return fmt.Errorf("a message over %d bytes must carry the token in the %s header, not only inside the message;"+
		" for a client that cannot send it, the server's owner can raise max_unauthenticated_message_bytes", max, auth.TokenHeader)
}

// cappedGzip is a gzip Decompressor that gives at most max bytes and
// fails with tooBig on the next one, so a bomb is inflated only as far as
// the message limit.
type cappedGzip struct {
	gzip.Reader
	max, left int64
	tooBig    error
}

func gzipCapped(max int, tooBig error) func() connect.Decompressor {
	return func() connect.Decompressor {
		return &cappedGzip{max: int64(max), tooBig: connect.NewError(connect.CodeResourceExhausted, tooBig)}
	}
}

func newGzipWriter() connect.Compressor { return gzip.NewWriter(io.Discard) }

func (z *cappedGzip) Reset(r io.Reader) error {
	z.left = z.max
	return z.Reader.Reset(r)
}

func (z *cappedGzip) Read(p []byte) (int, error) {
	if z.left <= 0 {
		var one [1]byte
		n, err := z.Reader.Read(one[:])
		if n > 0 {
			return 0, z.tooBig
		}
		return 0, err
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	n, err := z.Reader.Read(p)
	z.left -= int64(n)
	return n, err
}
