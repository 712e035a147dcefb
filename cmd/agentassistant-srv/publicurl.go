package main

import (
	"errors"
	"net/url"
	"strings"

	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// errPublicURL says what [channels] public_url must be.
var errPublicURL = errors.New(`it must be this server's address as your phone reaches it, http(s)://host[:port] (e.g. "https://aa.example.org"): the channels' buttons post there and their taps open the app there`)

// publicURL parses [channels] public_url; nil when it is not set. A
// button's address is the URL with /push/answer after it, so anything a
// URL may carry after its path (a query, a fragment), or a user, would
// make it one nobody can reach.
func publicURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return nil, errPublicURL
	}
	if !config.HostName(u.Hostname()) {
		return nil, errPublicURL
	}
	return u, nil
}

// trustPublicURL lets the guard answer at public_url: its host, as a
// reverse proxy in front passes it on, and its origin, as the app opened
// there sends it. The person named that address for this server already;
// making them name it again in allowed_hosts and allowed_origins would
// leave every button answering "forbidden host" until they did.
func trustPublicURL(g *auth.Guard, s string) {
	u, err := publicURL(s)
	if err != nil || u == nil {
		return
	}
	host := strings.ToLower(u.Hostname())
	g.Hosts = append(g.Hosts, host)
	origin := u.Scheme + "://" + strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		origin = u.Scheme + "://" + strings.ToLower(strings.TrimSuffix(u.Host, ":"+p))
	}
	g.Origins = append(g.Origins, origin)
}
