package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// arrivals is what a double of an outside service got, and when; a
// waiter learns of each one as it comes.
type arrivals struct {
	mu     sync.Mutex
	at     []time.Time
	bodies []string
	// changed is closed, and replaced, at each arrival.
	changed chan struct{}
}

func newArrivals() *arrivals { return &arrivals{changed: make(chan struct{})} }

func (a *arrivals) add(body string) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at, a.bodies = append(a.at, now), append(a.bodies, body)
	close(a.changed)
	a.changed = make(chan struct{})
}

// nth waits up to 10 s for the n-th (from 1) arrival.
func (a *arrivals) nth(ctx context.Context, what string, n int) (time.Time, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		a.mu.Lock()
		got, changed := len(a.at), a.changed
		if got >= n {
			at, body := a.at[n-1], a.bodies[n-1]
			a.mu.Unlock()
			return at, body, nil
		}
		a.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, "", fmt.Errorf("%s had %d, want %d: %w", what, got, n, ctx.Err())
		}
	}
}

// httpReceiver is an HTTP service that takes every POST with status
// (ntfy answers 200, a webhook receiver 200, a push service 201),
// recording it in got, or in byPath[path] when the path is one of those.
type httpReceiver struct {
	*httptest.Server
	got    *arrivals
	mu     sync.Mutex
	byPath map[string]*arrivals
	// conns counts the connections the clients opened.
	conns atomic.Int64
}

// route records the requests to path in a.
func (rc *httpReceiver) route(path string, a *arrivals) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.byPath[path] = a
}

func newHTTPReceiver(status int, tls bool) *httpReceiver {
	rc := &httpReceiver{got: newArrivals(), byPath: map[string]*arrivals{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		a := rc.byPath[r.URL.Path]
		rc.mu.Unlock()
		if a == nil {
			a = rc.got
		}
		a.add(string(b))
		w.WriteHeader(status)
	})
	rc.Server = httptest.NewUnstartedServer(h)
	rc.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			rc.conns.Add(1)
		}
	}
	if tls {
		rc.StartTLS()
	} else {
		rc.Start()
	}
	return rc
}

// smtpReceiver is an SMTP server (go-smtp) that takes every mail,
// without authentication or TLS.
type smtpReceiver struct {
	srv  *smtp.Server
	addr string
	got  *arrivals
}

func newSMTPReceiver() (*smtpReceiver, error) {
	rc := &smtpReceiver{got: newArrivals()}
	rc.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return smtpSession{rc.got}, nil }))
	rc.srv.Domain = "localhost"
	rc.srv.ErrorLog = quietLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for SMTP: %w", err)
	}
	rc.addr = ln.Addr().String()
	go func() { _ = rc.srv.Serve(ln) }() // ends with close
	return rc, nil
}

func (rc *smtpReceiver) close() { _ = rc.srv.Close() }

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}
func (quietLog) Println(...any)        {}

type smtpSession struct{ got *arrivals }

func (smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.got.add(string(b))
	return nil
}
func (smtpSession) Reset()        {}
func (smtpSession) Logout() error { return nil }
