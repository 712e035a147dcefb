package ingress

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// HTTPOptions configure the external orchestrator client.
type HTTPOptions struct {
	// URL is the orchestrator's base URL ([ingress] orchestrator_url); its
	// /internal/... endpoints are seed 003's.
	URL string
	// Token, when set, is sent as "Authorization: Bearer" on every call.
	Token string
	// Timeout bounds connecting, the response headers of POST
	// /internal/invoke and then its first event (which names the run),
	// and each other call (default 10s). The rest of a run's stream has
	// no time limit: a run may wait for a person, and seed 003 gives the
	// stream no heartbeat to tell a quiet run from a dead one.
	Timeout time.Duration
	// Retries is how many more times a call the orchestrator did not take
	// is tried (default 2): a connection refused or reset, a 502, 503 or
	// 504; and for the calls other than invoke, any 5xx and timeouts.
	Retries int
	// Backoff is the first wait between tries, doubling (default 200ms).
	Backoff time.Duration
	Logger  *slog.Logger
}

// maxEvent bounds one event of the orchestrator's stream.
const maxEvent = 1 << 20

// HTTPOrchestrator is an Orchestrator reached over seed 003's HTTP
// contract: POST /internal/invoke answering Server-Sent Events,
// /internal/tool_calls/:id/submit, /internal/approvals/:id/decide and
// /internal/runs/:id/cancel.
type HTTPOrchestrator struct {
	o    HTTPOptions
	base *url.URL
	hc   *http.Client
	log  *slog.Logger
}

// NewHTTPOrchestrator checks the URL and returns the client.
func NewHTTPOrchestrator(o HTTPOptions) (*HTTPOrchestrator, error) {
	u, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("[ingress] orchestrator_url %q: want http(s)://host[:port][/path]", o.URL)
	}
	opt.Default(&o.Timeout, 10*time.Second)
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = 2
	}
	opt.Default(&o.Backoff, 200*time.Millisecond)
	opt.Logger(&o.Logger)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = o.Timeout
	tr.TLSHandshakeTimeout = o.Timeout
	return &HTTPOrchestrator{o: o, base: u, hc: &http.Client{Transport: tr}, log: o.Logger}, nil
}

// CloseIdle lets go of the kept-alive connections.
func (c *HTTPOrchestrator) CloseIdle() { c.hc.CloseIdleConnections() }

func (c *HTTPOrchestrator) endpoint(parts ...string) string {
	u := *c.base
	for _, p := range parts {
		u.Path += "/" + url.PathEscape(p)
	}
	u.RawPath = ""
	return u.String()
}

func (c *HTTPOrchestrator) newRequest(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	return req, nil
}

// errNotTaken marks a failure after which the orchestrator surely did
// not act (nothing reached it, or it said it is unavailable).
type errNotTaken struct{ err error }

func (e errNotTaken) Error() string { return e.err.Error() }
func (e errNotTaken) Unwrap() error { return e.err }

func orchError(format string, args ...any) *Error {
	return errorf(wire.IngressOrchestratorError, format, args...)
}

// retry runs try until it succeeds, fails in a way that may not be
// retried, or the tries are spent.
func (c *HTTPOrchestrator) retry(ctx context.Context, what string, retryable func(error) bool, try func() error) error {
	wait := c.o.Backoff
	for n := 0; ; n++ {
		err := try()
		if err == nil || n >= c.o.Retries || !retryable(err) || ctx.Err() != nil {
			return err
		}
		c.log.Debug("orchestrator call failed; trying again", "call", what, "try", n+1, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait *= 2
	}
}

func notTaken(err error) bool {
	var nt errNotTaken
	return errors.As(err, &nt)
}

// classify turns a transport error into one that says whether the call
// may be tried again.
func classify(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return errNotTaken{err}
	}
	return err
}

func unavailable(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// Invoke posts the run to /internal/invoke and relays its event stream.
func (c *HTTPOrchestrator) Invoke(ctx context.Context, req InvokeRequest, started func(string), emit func(Event)) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode invoke: %w", err)
	}
	// The stream's own context: cut when the first event is late.
	sctx, cut := context.WithCancel(ctx)
	defer cut()
	var resp *http.Response
	err = c.retry(ctx, "invoke", notTaken, func() error {
		hr, err := c.newRequest(sctx, c.endpoint("internal", "invoke"), body)
		if err != nil {
			return err
		}
		hr.Header.Set("Accept", "text/event-stream")
		r, err := c.hc.Do(hr)
		if err != nil {
			return classify(err)
		}
		if r.StatusCode != http.StatusOK {
			msg := readSome(r.Body)
			_ = r.Body.Close()
			e := orchError("POST /internal/invoke: %s: %s", r.Status, msg)
			if unavailable(r.StatusCode) {
				return errNotTaken{e}
			}
			return e
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "text/event-stream" {
			_ = r.Body.Close()
			return orchError("POST /internal/invoke answered %q, not text/event-stream", r.Header.Get("Content-Type"))
		}
		resp = r
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return orchError("POST /internal/invoke: %s", describe(err, c.o.Timeout))
	}
	defer func() { _ = resp.Body.Close() }()
	var late atomic.Bool
	first := time.AfterFunc(c.o.Timeout, func() {
		late.Store(true)
		cut()
	})
	defer first.Stop()
	runID := ""
	for se, rerr := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: maxEvent}) {
		if rerr != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case late.Load():
				return orchError("the orchestrator sent no event within %s of answering POST /internal/invoke (its first event names the run)", c.o.Timeout)
			case errors.Is(rerr, bufio.ErrTooLong):
				return orchError("an event of the orchestrator's stream is larger than %d bytes, the limit; the run is ended", maxEvent)
			}
			return orchError("the orchestrator's event stream broke: %s", describe(rerr, c.o.Timeout))
		}
		if strings.TrimSpace(se.Data) == "" {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(se.Data), &ev); err != nil {
			c.log.Warn("orchestrator event is not JSON; skipped", "err", err)
			continue
		}
		ev.Type = cmp.Or(ev.Type, se.Type)
		if err := CheckEvent(ev); err != nil {
			c.log.Warn("orchestrator event refused", "type", ev.Type, "err", err)
			continue
		}
		if runID == "" {
			if ev.RunID == "" {
				if ev.Type == wire.IngressError {
					return orchError("%s", ev.Message)
				}
				return orchError("the orchestrator's first event (%s) names no run_id", wire.Clip(ev.Type, 32))
			}
			if !first.Stop() {
				return orchError("the orchestrator sent no event within %s of answering POST /internal/invoke (its first event names the run)", c.o.Timeout)
			}
			runID = ev.RunID
			started(runID)
		}
		if ev.Type == wire.IngressRunStarted {
			continue // ours to send, from started
		}
		ev.Seq, ev.LastSeq, ev.Replayed, ev.Gap = 0, nil, 0, false
		emit(ev)
		if ev.Type == wire.IngressDone || ev.Type == wire.IngressError {
			return nil
		}
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case late.Load():
		return orchError("the orchestrator sent no event within %s of answering POST /internal/invoke (its first event names the run)", c.o.Timeout)
	}
	return orchError("the orchestrator's event stream ended before the run's done or error")
}

// describe says what went wrong with a call in words, not a transport's
// internals (addresses, "read tcp …").
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.As(err, &op) && op.Op == "dial":
		return "could not connect to the orchestrator"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "the connection ended early"
	case errors.As(err, &op):
		return "the connection broke"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the connection broke"
	}
	return err.Error()
}

func readSome(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
}

// call posts body to one of the short endpoints.
func (c *HTTPOrchestrator) call(ctx context.Context, what string, body any, parts ...string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	url := c.endpoint(parts...)
	err = c.retry(ctx, what, func(err error) bool {
		var e *Error
		return !errors.As(err, &e) || notTaken(err) // transport errors and 5xx
	}, func() error {
		cctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
		hr, err := c.newRequest(cctx, url, b)
		if err != nil {
			return err
		}
		r, err := c.hc.Do(hr)
		if err != nil {
			return classify(err)
		}
		defer func() { _ = r.Body.Close() }()
		if r.StatusCode/100 == 2 {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
			return nil
		}
		e := orchError("POST %s: %s: %s", strings.TrimPrefix(url, c.base.String()), r.Status, readSome(r.Body))
		if r.StatusCode >= 500 {
			return errNotTaken{e}
		}
		return e
	})
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return orchError("%s: %s", what, describe(err, c.o.Timeout))
}

// SubmitToolResult posts to /internal/tool_calls/:id/submit.
func (c *HTTPOrchestrator) SubmitToolResult(ctx context.Context, id string, r ToolResult) error {
	return c.call(ctx, "submit tool result", r, "internal", "tool_calls", id, "submit")
}

// Decide posts to /internal/approvals/:id/decide.
func (c *HTTPOrchestrator) Decide(ctx context.Context, id string, d Decision) error {
	return c.call(ctx, "decide approval", d, "internal", "approvals", id, "decide")
}

// Cancel posts to /internal/runs/:id/cancel.
func (c *HTTPOrchestrator) Cancel(ctx context.Context, id string) error {
	return c.call(ctx, "cancel run", struct{}{}, "internal", "runs", id, "cancel")
}
