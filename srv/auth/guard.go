package auth

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Guard rejects requests whose Host header is not one of ours (DNS
// rebinding) and checks the Origin of WebSocket upgrades (cross-site
// WebSocket hijacking). The zero value, and a nil *Guard, accept loopback
// names only.
type Guard struct {
	// Hosts are extra host names (without port) the server answers to,
	// e.g. a LAN name when it listens beyond loopback. Compared lower-case.
	Hosts []string
	// Origins are extra origins ("http://host:port") allowed to open
	// WebSockets and make cross-origin calls, e.g. a UI dev server.
	Origins []string
}

// Wrap returns h behind the Host check.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.HostAllowed(r.Host) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HostAllowed reports whether a Host header names this server: a loopback
// name or address, or one of g.Hosts.
func (g *Guard) HostAllowed(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.ToLower(host)
	if host == "localhost" {
		return true
	}
	// Only canonical dotted or colon forms parse here, so tricks such as
	// "0177.0.0.1" or "localhost." fall through to the allowlist and fail.
	if ip := net.ParseIP(host); ip != nil && ip.String() == canonicalIP(host) && ip.IsLoopback() {
		return true
	}
	return g != nil && slices.ContainsFunc(g.Hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

func canonicalIP(s string) string {
	ip := net.ParseIP(s)
	if ip == nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil && !strings.Contains(s, ":") {
		return v4.String()
	}
	return ip.String()
}

// OriginAllowed reports whether a WebSocket upgrade or cross-origin call
// may proceed. Clients that send no Origin (native apps, agents, the MCP
// bridge) pass; a browser's Origin must be this very server, as reached
// through an allowed Host, or one of g.Origins. A request with more than
// one Origin header is no browser's (RFC 6454 7.3: one at most) and is
// refused: a check of the first alone would let the others by unseen.
func (g *Guard) OriginAllowed(r *http.Request) bool {
	if len(r.Header.Values("Origin")) > 1 {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if g != nil && slices.ContainsFunc(g.Origins, func(o string) bool { return strings.EqualFold(o, origin) }) {
		return true
	}
	u, err := url.Parse(origin)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if err != nil || u.Scheme != scheme || u.User != nil || u.Path != "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) && g.HostAllowed(u.Host)
}
