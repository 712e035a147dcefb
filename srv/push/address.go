package push

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Where a push may go. A subscription's endpoint comes from a token
// holder's browser, and the server then POSTs to it: left free, a token
// would aim the server at what only the server can reach (a service on
// this machine, the private network, a cloud's metadata service at
// 169.254.169.254). Push services (FCM, Mozilla's autopush, Apple's,
// Windows') are public https, so unless Options.AllowPrivateEndpoints a
// subscription must name a public address when it is made, and a push
// connects only to a public address, none of this machine's: checked on
// the address dialled, after the name is resolved, so a name that
// resolves elsewhere later (DNS rebinding) gets nowhere either.

// errPrivate: an endpoint's address is not a public one.
var errPrivate = errors.New("not a public address: push services are public (allow_private_endpoints allows others)")

var (
	cgnat = netip.MustParsePrefix("100.64.0.0/10")  // RFC 6598, carrier-grade NAT (and tailnets)
	here  = netip.MustParsePrefix("0.0.0.0/8")      // RFC 1122, "this network"
	nat64 = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: an IPv4 address, through a NAT64 gateway
	local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215, a private network's NAT64
	site  = netip.MustParsePrefix("fec0::/10")      // RFC 3879, site-local (deprecated, still private)
	bcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// publicAddr says whether a is an address of the public internet: not
// loopback, private (RFC 1918, fc00::/7), link-local, CGNAT, unspecified
// or multicast, whether written as IPv4, IPv4 in IPv6 or NAT64.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return publicAddr(netip.AddrFrom4([4]byte(b[12:])))
	}
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!cgnat.Contains(a) && !here.Contains(a) && !local.Contains(a) && !site.Contains(a) && a != bcast
}

// endpointHost says what is wrong with an endpoint's host, "" when
// nothing: an address not public, or a name that is this machine's by
// definition (RFC 6761's localhost). Other names are checked as a push
// connects.
func endpointHost(host string) string {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && (!publicAddr(a) || ownAddr(a)) ||
		h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "endpoint must be a push service at a public address, not " + host +
			" (this machine, a private network, link-local or CGNAT): push services are public"
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err != nil && endsInNumber(h) {
		return "endpoint must be a push service at a public address, not " + host +
			" (an IPv4 address written another way, as one number, or in octal or hex): push services are public names"
	}
	return ""
}

// endsInNumber reports whether a host that is no canonical address is
// one all the same: a last label of digits, or 0x and hex digits, is
// read as an IPv4 address (in parts, octal or hex) by inet_aton, by
// resolvers built on it and by browsers (the URL Standard's "ends in a
// number"), so 2130706433, 0177.0.0.1 and 127.1 are 127.0.0.1. No
// top-level domain is a number.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if x, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(x, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// dialPublic refuses a connection to an address that is not public. It
// is a net.Dialer's Control: it sees the address resolved, just before
// the connection is made.
func dialPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, errPrivate)
	}
	if !publicAddr(ap.Addr()) || ownAddr(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", address, errPrivate)
	}
	return nil
}

// ownAddr reports whether a is an address of this machine's interfaces:
// public or not, it reaches this machine's services (a server's public
// IPv4, its global IPv6), past a firewall that filters only what comes
// from outside. Asked at each dial, as addresses change; pushes keep
// their connections, so dials are few.
func ownAddr(a netip.Addr) bool {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return false // the other checks still hold
	}
	a = a.Unmap().WithZone("")
	for _, ia := range as {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Unmap().WithZone("") == a {
			return true
		}
	}
	return false
}

// pushTransport is the transport of the pushes: its connections kept for
// the next burst and, unless private is allowed, made to public addresses
// only. Then it connects directly, not through an HTTPS_PROXY of the
// environment: what a proxy connects to is not checked here.
func pushTransport(allowPrivate bool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxPerService
	if !allowPrivate {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: dialPublic}
		tr.DialContext = d.DialContext
		tr.Proxy = nil
	}
	return tr
}

// noRedirects is the push client's CheckRedirect: a push service answers
// a push (RFC 8030: 201 Created) and never sends it on. A redirect would
// take the push, and the VAPID Authorization with it when the host stays
// the same, where the subscription did not name: over plain http too,
// which a subscription may not be. The redirect is the push's answer, a
// failure that is not tried again.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
