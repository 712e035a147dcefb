package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// serviceURL refuses a channel's service URL that cannot be reached as
// written: one without http:// or https:// and a host is posted to as a
// path ("unsupported protocol scheme"), question after question.
func serviceURL(table, key, s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("channels.%s: %s = %q: it must be a URL with http:// or https:// and a host (e.g. %q)", table, key, s, "https://"+exampleHost(table))
	}
	return nil
}

// mailAddr refuses a mail server's address that is not host:port: the
// port tells TLS from STARTTLS, and nothing guesses it.
func mailAddr(key, s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if n, perr := strconv.Atoi(port); err == nil && host != "" && perr == nil && n >= 1 && n <= 65535 {
		return nil
	}
	return fmt.Errorf("channels.email: %s = %q: it must be host:port, the port from 1 to 65535 (e.g. %q)", key, s, map[string]string{"smtp_addr": "smtp.example.org:587", "imap_addr": "imap.example.org:993"}[key])
}

func exampleHost(table string) string {
	switch table {
	case "ntfy":
		return "ntfy.sh"
	case "telegram":
		return "api.telegram.org"
	case "slack":
		return "slack.com/api/"
	}
	return "n8n.example.org/webhook/aa"
}
