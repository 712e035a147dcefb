package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestComposeConfig: the compose cluster's config file names only
// settings the server has, under their current names.
func TestComposeConfig(t *testing.T) {
	cfg, fs := composeConfig(t)
	if cfg.Cluster.NATSURL == "" || cfg.Cluster.Replicas != 3 {
		t.Errorf("config = %+v", cfg)
	}
	if len(fs.Moved()) != 0 {
		t.Errorf("old keys: %v", fs.Moved())
	}
}

// TestComposeHealthCheckAnswered: Caddy's active health check of
// deploy/compose asks each instance's /health at the upstream's address
// as written in the Caddyfile (Host "srv1:22080": Caddy sends the dial
// address unless health_headers names a Host), and the instances answer
// a Host they do not know 403. An instance answering its balancer 403 is
// one it takes out: all three out, the cluster answers no one. The
// compose config must admit each upstream's name, as docs/cluster.md's
// layout does with its allowed_hosts; its own container addresses, which
// the server adds when listening on every address, are never these names.
func TestComposeHealthCheckAnswered(t *testing.T) {
	caddyfile, err := os.ReadFile("../../deploy/compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	proxy := regexp.MustCompile(`(?m)^\s*reverse_proxy\s+([^{\n]+)\{`).FindSubmatch(caddyfile)
	if proxy == nil || !bytes.Contains(caddyfile, []byte("health_uri /health")) {
		t.Fatalf("the Caddyfile has no reverse_proxy with a /health check:\n%s", caddyfile)
	}
	hostHeader := regexp.MustCompile(`(?s)health_headers\s*\{[^}]*\bHost\s+(\S+)`).FindSubmatch(caddyfile)
	cfg, _ := composeConfig(t)
	guard := &auth.Guard{Hosts: cfg.Server.AllowedHosts, Origins: cfg.Server.AllowedOrigins}
	upstreams := strings.Fields(string(proxy[1]))
	if len(upstreams) != 3 {
		t.Fatalf("the Caddyfile balances %v, not the three instances", upstreams)
	}
	for _, up := range upstreams {
		host := up
		if hostHeader != nil {
			host = string(hostHeader[1])
		}
		if !guard.HostAllowed(host) {
			t.Errorf("Caddy's health check of %s asks with Host %q, which the compose instances refuse (403 forbidden host)", up, host)
		}
	}
}

// composeConfig is deploy/compose's agentassistant-srv.toml, read as the
// instances read it.
func composeConfig(t *testing.T) (fileConfig, *config.Flags) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/compose/agentassistant-srv.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, fs, err := loadConfig(t, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, fs
}
