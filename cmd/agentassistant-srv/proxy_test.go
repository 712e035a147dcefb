package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestReverseProxyAsDocumented: behind the TLS-terminating reverse proxy
// docs/push.md shows (Caddy, which passes the site's Host on and talks
// plain HTTP to the server), the settings it gives with it let the
// browser's page load and its WebSocket upgrade through the server's Host
// and Origin checks, and start the server.
func TestReverseProxyAsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/push.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "reverse_proxy 127.0.0.1:22080")
	if !ok {
		t.Fatal("docs/push.md shows no reverse proxy")
	}
	site := regexp.MustCompile(`(?m)^\s*([a-z0-9.-]+) \{\s*$`).FindAllStringSubmatch(string(b[:len(b)-len(rest)]), -1)
	if site == nil {
		t.Fatal("docs/push.md's reverse proxy names no site")
	}
	name := site[len(site)-1][1]
	section, _, _ := strings.Cut(rest, "\n- **")
	_, block, ok := strings.Cut(section, "```toml\n")
	if !ok {
		t.Fatalf("docs/push.md's reverse proxy shows no agentassistant-srv.toml for %s", name)
	}
	block, _, _ = strings.Cut(block, "```")
	var cfg fileConfig
	if _, err := toml.Decode(dedent(block), &cfg); err != nil {
		t.Fatalf("docs/push.md's agentassistant-srv.toml: %v", err)
	}
	guard := &auth.Guard{Hosts: cfg.Server.AllowedHosts, Origins: cfg.Server.AllowedOrigins}
	r := httptest.NewRequest("GET", "/ws", nil)
	r.Host = name
	r.Header.Set("Origin", "https://"+name)
	r.Header.Set("X-Forwarded-Proto", "https")
	if !guard.HostAllowed(r.Host) {
		t.Errorf("behind the proxy, Host %s is refused with %s", name, block)
	}
	if !guard.OriginAllowed(r) {
		t.Errorf("behind the proxy, the page's WebSocket (Origin https://%s) is refused with %s", name, block)
	}
	if stdout, _, err := start(t, dedent(block)); err != nil || !strings.Contains(stdout, "is running") {
		t.Errorf("docs/push.md's agentassistant-srv.toml does not start the server: %v", err)
	}
}

// dedent removes the indentation a list item gives its code block.
func dedent(s string) string {
	var out strings.Builder
	for line := range strings.Lines(s) {
		out.WriteString(strings.TrimLeft(line, " "))
	}
	return out.String()
}

// TestDocumentedCommandsListenWithAToken: every agentassistant-srv
// command the documentation shows that listens beyond this machine gives
// it a token, which the server requires there: copied as it is, it starts.
func TestDocumentedCommandsListenWithAToken(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	host := regexp.MustCompile(`-host\s+(\S+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inBlock := false
		for line := range strings.Lines(string(b)) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "```") {
				inBlock = !inBlock
				continue
			}
			if !inBlock || !strings.Contains(line, "agentassistant-srv ") {
				continue
			}
			m := host.FindStringSubmatch(line)
			if m != nil && !isLoopback(m[1]) && !strings.Contains(line, "-token") {
				t.Errorf("%s: %q listens on %s without -token: the server refuses to start", filepath.Base(f), line, m[1])
			}
		}
	}
}

// TestPublicNamesHaveTheirOrigin: where the documentation puts a public
// name (one of example.com's) in allowed_hosts, it is a proxy's or a
// balancer's, which serves https while the server behind it speaks HTTP:
// the example gives the page's https origin in allowed_origins too, or
// the inbox loads and its WebSocket is refused.
func TestPublicNamesHaveTheirOrigin(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	hosts := regexp.MustCompile(`allowed_hosts = \[([^\]]*)\]`)
	name := regexp.MustCompile(`"([a-z0-9.-]+\.example\.com)"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range hosts.FindAllStringSubmatchIndex(text, -1) {
			// The origins go with the hosts: within the same few lines.
			near := text[m[0]:min(len(text), m[1]+300)]
			for _, n := range name.FindAllStringSubmatch(text[m[2]:m[3]], -1) {
				if !strings.Contains(near, `allowed_origins = [`) || !strings.Contains(near, `"https://`+n[1]+`"`) {
					t.Errorf("%s: allowed_hosts names %s without allowed_origins = [\"https://%s\"]", filepath.Base(f), n[1], n[1])
				}
			}
		}
	}
}
