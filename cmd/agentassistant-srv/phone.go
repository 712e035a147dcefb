package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/skip2/go-qrcode"

	"github.com/agentassistant/agentassistant/internal/config"
)

// A phone on the same network opens the server at one of this machine's
// addresses: when it listens on all of them, the start-up text shows the
// phone's URL as a QR code, and those addresses are names the server
// answers to (a Host header that is an address of this very machine
// cannot come from DNS rebinding).

// isWildcard: host listens on every address of the machine.
func isWildcard(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// ownAddrs are this machine's unicast addresses a phone may reach, the
// private IPv4 ones first.
func ownAddrs() []netip.Addr {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifaddrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := p.Addr().Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
			continue
		}
		out = append(out, ip)
	}
	rank := func(a netip.Addr) int {
		switch {
		case a.Is4() && a.IsPrivate():
			return 0
		case a.Is4():
			return 1
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b netip.Addr) int { return rank(a) - rank(b) })
	return out
}

// phoneURL is the URL a phone opens: u at host, or at the machine's
// first reachable address when host is a wildcard; "" when the server
// listens on loopback only, or has no such address.
func phoneURL(u url.URL, host string, addrs []netip.Addr) string {
	switch {
	case isLoopback(host):
		return ""
	case isWildcard(host):
		if len(addrs) == 0 {
			return ""
		}
		host = addrs[0].String()
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

// writeQR writes text as a QR code for a terminal: two modules a
// character (upper and lower half block), dark on light with the quiet
// zone around it, in explicit colours so that it reads the same on a
// light or a dark terminal.
func writeQR(w io.Writer, text string) error {
	q, err := qrcode.New(text, qrcode.Low)
	if err != nil {
		return fmt.Errorf("make the QR code: %w", err)
	}
	bm := q.Bitmap() // true is dark; the quiet zone included
	const (
		reset = "\x1b[0m"
		fgW   = "\x1b[97m" // bright white
		fgB   = "\x1b[30m" // black
		bgW   = "\x1b[107m"
		bgB   = "\x1b[40m"
	)
	var b strings.Builder
	for y := 0; y < len(bm); y += 2 {
		for x := range bm[y] {
			top, bottom := bm[y][x], y+1 < len(bm) && bm[y+1][x]
			fg, bg := fgW, bgW
			if top {
				fg = fgB
			}
			if bottom {
				bg = bgB
			}
			b.WriteString(fg + bg + "▀")
		}
		b.WriteString(reset + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// printPhone tells how a phone opens the server: its URL, as a QR code
// too on a terminal (or when asked with -qr).
func printPhone(w io.Writer, u url.URL, host string, qr bool) {
	p := phoneURL(u, host, ownAddrs())
	if p == "" {
		return
	}
	_, _ = fmt.Fprintf(w, "On a phone on this network, open (or scan):\n\n  %s\n\n", p)
	if qr || config.Terminal(w) { // where the QR code's colours show
		_ = writeQR(w, p)
		_, _ = fmt.Fprintln(w)
	}
	if u.Scheme != "https" {
		_, _ = fmt.Fprintln(w, "Notifications with the page closed need HTTPS there: see docs/push.md.")
		_, _ = fmt.Fprintln(w)
	}
}
