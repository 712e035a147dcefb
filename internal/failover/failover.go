// Package failover sends a client's HTTP calls to one of several servers
// (the instances of a cluster): to the same one while it answers, to the
// next once a call to it fails or it answers 503 (Unavailable). The call that failed is not repeated
// here: its caller decides (agentassistant-mcp re-attaches by request ID,
// and the re-attach goes to the next server).
package failover

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Transport is an http.RoundTripper over several servers.
type Transport struct {
	scheme string   // http or https, for every server
	addrs  []string // host:port
	cur    atomic.Uint64
	base   http.RoundTripper
}

// New returns a Transport over addrs (host:port), reached with scheme
// (http or https, as Parse says), which sends through base. The first
// address is tried first.
func New(scheme string, addrs []string, base http.RoundTripper) *Transport {
	return &Transport{scheme: scheme, addrs: addrs, base: base}
}

// Current is the address calls go to now.
func (t *Transport) Current() string {
	return t.addrs[t.cur.Load()%uint64(len(t.addrs))]
}

// RoundTrip sends req to the current server, whatever host its URL names.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	n := t.cur.Load()
	addr := t.addrs[n%uint64(len(t.addrs))]
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.scheme, addr, addr
	resp, err := t.base.RoundTrip(r)
	// 503 (Connect's Unavailable): the server is shutting down, or lost
	// the cluster's NATS; another instance may have it.
	if (err != nil || resp.StatusCode == http.StatusServiceUnavailable) && req.Context().Err() == nil {
		// The next call goes to the next server; a failure seen by many
		// calls at once moves on once.
		t.cur.CompareAndSwap(n, n+1)
	}
	return resp, err
}

// Parse reads a comma-separated list of servers, host or host:port
// (defaultPort when it has none), or a URL, http://host[:port] or
// https://host[:port] (the scheme's port when it has none: a server
// behind its own TLS or a reverse proxy's). scheme is the one of them
// all: https when they say so, else http; a list that mixes them is
// refused.
func Parse(list string, defaultPort int) (addrs []string, scheme string, err error) {
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, "", errors.New("empty server address in the list")
		}
		s := "http"
		if i := strings.Index(a, "://"); i >= 0 {
			u, err := url.Parse(a)
			if err != nil {
				return nil, "", fmt.Errorf("server address %q: %w", a, err)
			}
			s = strings.ToLower(u.Scheme)
			switch {
			case s != "http" && s != "https":
				return nil, "", fmt.Errorf("server address %q: the scheme is http or https", a)
			case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Host == "":
				return nil, "", fmt.Errorf("server address %q: a server is %s://HOST or %s://HOST:PORT, with no path, user or query", a, s, s)
			}
			a = u.Host
			if u.Port() == "" {
				a = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[s])
			}
		} else if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(a, strconv.Itoa(defaultPort))
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, "", fmt.Errorf("server address %q: %w", a, err)
		}
		if host == "" {
			return nil, "", fmt.Errorf("server address %q: it names no host (write HOST:PORT)", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, "", fmt.Errorf("server address %q: the port must be a number from 1 to 65535", a)
		}
		if scheme != "" && s != scheme {
			return nil, "", fmt.Errorf("server addresses %q: one is %s, another %s: the instances are reached alike (write each as https://HOST:PORT when they serve HTTPS)", list, scheme, s)
		}
		scheme = s
		addrs = append(addrs, a)
	}
	return addrs, scheme, nil
}

// Probe reports whether the current server answers at all: a GET of its
// /health within timeout, answered with anything but 503. A process
// stopped with SIGSTOP still completes TCP handshakes in its kernel, so
// only a request shows it frozen: the calls waiting on it would wait for
// nothing. header goes with the request (the token: a probe is not a
// failed login). skip moves the calls on from the server probed to the next,
// for a caller that finds it stalled (once is not enough: a busy server
// may miss one probe).
func (t *Transport) Probe(ctx context.Context, timeout time.Duration, header http.Header) (skip func(), err error) {
	n := t.cur.Load()
	addr := t.addrs[n%uint64(len(t.addrs))]
	skip = func() { t.cur.CompareAndSwap(n, n+1) }
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.scheme+"://"+addr+"/health", nil)
	if err != nil {
		return skip, err
	}
	maps.Copy(req.Header, header)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return skip, fmt.Errorf("probe %s: %w", addr, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return skip, fmt.Errorf("probe %s: unhealthy (503)", addr)
	}
	return skip, nil
}
