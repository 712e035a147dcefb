package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"
)

// runHealth is "agentassistant-srv health": it asks a running server's
// unauthenticated /health and fails unless it answers 200. It is the
// container's health check: the image has no shell and no curl.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agentassistant-srv health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	const defaultPort = 22080
	url := fs.String("url", fmt.Sprintf("http://127.0.0.1:%d/health", defaultPort), "the server's /health")
	// The server's own -host and -port, so the command that started it
	// says where to ask: a person who ran "-port 8080" writes it here too.
	host := fs.String("host", "127.0.0.1", "the host the server listens on (0.0.0.0 or :: mean this machine)")
	port := fs.Int("port", defaultPort, "the port the server listens on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["url"] && (given["host"] || given["port"]) {
		return errors.New("health: give either -url or -port (and -host), not both")
	}
	if !given["url"] {
		if *port < 1 || *port > 65535 {
			return fmt.Errorf("health: -port %d: it must be 1 to 65535, the port the server listens on", *port)
		}
		*url = "http://" + net.JoinHostPort(localHost(*host), strconv.Itoa(*port)) + "/health"
	}
	if given["url"] {
		// The server's address alone (as copied from the browser) means
		// its /health: its page answers 200 however unhealthy it is.
		u, err := neturl.Parse(*url)
		if err != nil {
			return fmt.Errorf("health: -url %q: %w", *url, err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/health"
			*url = u.String()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %s: %s", *url, resp.Status, body)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", body)
	return err
}

// localHost is where to reach a server listening on host: a wildcard
// address (every interface) is reached on loopback.
func localHost(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch host {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return host
}
