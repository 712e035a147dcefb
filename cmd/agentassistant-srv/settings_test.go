package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// start runs agentassistant-srv with the config file body and args, its
// context already ended: a server that accepts its settings prints its URL
// and returns nil at once; one that refuses them returns why. It returns
// what run printed and the files in its data directory.
func start(t *testing.T, body string, args ...string) (stdout string, data []string, err error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "srv.toml")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	pre := []string{"-config", file, "-data", dataDir}
	if !strings.Contains(body, "agentassistant_server_port") {
		pre = append(pre, "-port", "0")
	}
	err = run(ctx, append(pre, args...), &out, &errOut)
	entries, _ := os.ReadDir(dataDir)
	for _, e := range entries {
		data = append(data, e.Name())
	}
	return out.String(), data, err
}

// TestImpossibleSettings: every setting whose value cannot work is
// refused at start, before a token or a database is created or a URL
// printed, with a line naming the key, the value and what is allowed, from
// the file and from a flag alike.
func TestImpossibleSettings(t *testing.T) {
	for _, c := range []struct {
		body string
		args []string
		want []string // in the error
	}{
		{"ping_interval_seconds = 100\npong_wait_seconds = 5\n", nil, []string{"ping_interval_seconds = 100", "below pong_wait_seconds (5)"}},
		{"ping_interval_seconds = 60\n", nil, []string{"ping_interval_seconds = 60", "below pong_wait_seconds (60)"}},
		{"pong_wait_seconds = 5\n", nil, []string{"pong_wait_seconds = 5", "above ping_interval_seconds (30)"}},
		{"max_connections_per_token = -1\n", nil, []string{"max_connections_per_token = -1", "1 or more"}},
		{"max_connections_per_token = 0\n", nil, []string{"max_connections_per_token = 0"}},
		{"max_unauthenticated_connections = 0\n", nil, []string{"max_unauthenticated_connections = 0", "1 or more"}},
		{"max_unauthenticated_per_address = -1\n", nil, []string{"max_unauthenticated_per_address = -1"}},
		{"max_idle_connections = 0\n", nil, []string{"max_idle_connections (-max-idle-connections) = 0", "1 or more"}},
		{"", []string{"-max-idle-connections-per-address", "-5"}, []string{"max_idle_connections_per_address (-max-idle-connections-per-address) = -5"}},
		{"max_unauthenticated_message_bytes = -10\n", nil, []string{"max_unauthenticated_message_bytes = -10", "from 1024"}},
		{"max_unauthenticated_message_bytes = 100000000\n", nil, []string{"max_unauthenticated_message_bytes = 100000000", "16777216"}},
		{"history_days = -3\n", nil, []string{"history_days = -3", "1 to "}},
		{"history_days = 200000\n", nil, []string{"history_days = 200000"}}, // past what a time.Duration holds
		{"agui_max_body_bytes = 0\n", nil, []string{"agui_max_body_bytes = 0"}},
		{"procs = -4\n", nil, []string{"procs = -4", "0 (the Go runtime's choice)"}},
		{"nats_replicas = 7\n", nil, []string{"nats_replicas = 7", "only with nats_url", "from 1 to 5"}},
		{"nats_replicas = 3\n", nil, []string{"nats_replicas = 3", "only with nats_url"}},
		{"booking_catalog = \"/nonexistent/catalog.json\"\n", nil, []string{"booking_catalog = \"/nonexistent/catalog.json\"", "readable catalog"}},
		{"instance_name = \"a\"\n", nil, []string{"instance_name (-instance) = \"a\"", "only with nats_url"}},
		{"", []string{"-instance", "a"}, []string{"instance_name (-instance)"}},
		{"history_scan = 5\n", nil, []string{"history_scan = 5", "only with nats_url"}},
		{"nats_url = \",\"\n", nil, []string{`nats_url (-nats-url) = ","`}},
		{"allowed_origins = [\"not a url\"]\n", nil, []string{`allowed_origins = "not a url"`, "scheme://host[:port]"}},
		{"allowed_origins = [\"http://x/\"]\n", nil, []string{`allowed_origins = "http://x/"`}},
		{"allowed_origins = [\"http://x:80\"]\n", nil, []string{`allowed_origins = "http://x:80"`, "default port 80"}},
		{"allowed_hosts = [\"http://x\"]\n", nil, []string{`allowed_hosts = "http://x"`, "without scheme, port or path"}},
		{"allowed_hosts = [\"x:80\"]\n", nil, []string{`allowed_hosts = "x:80"`}},
		{"agentassistant_server_port = 70000\n", nil, []string{"agentassistant_server_port (-port) = 70000", "0 to 65535"}},
		{"", []string{"-port", "-1"}, []string{"agentassistant_server_port (-port) = -1"}},
		{"agentassistant_server_host = \"http://x\"\n", nil, []string{`agentassistant_server_host (-host) = "http://x"`}},
		{"", []string{"-host", "127.0.0.1:80"}, []string{`agentassistant_server_host (-host) = "127.0.0.1:80"`}},
		{"log_level = \"loud\"\n", nil, []string{`log_level (-log-level) = "loud"`, "debug, info, warn or error"}},
		{"tokens = [\"short\"]\n", nil, []string{"tokens[0]", "too short"}},
		{"", []string{"-token", "has a space"}, []string{"agentassistant_server_token (-token)", "white space"}},
		{"orphan_grace_seconds = 0\n", nil, []string{"orphan_grace_seconds = 0"}},
		{"write_wait_seconds = -1\n", nil, []string{"write_wait_seconds = -1"}},
		{"login_timeout_seconds = 0\n", nil, []string{"login_timeout_seconds = 0"}},
		{"host_grace_seconds = -5\n", nil, []string{"host_grace_seconds = -5"}},
		{"missed_answer_hours = 0\n", nil, []string{"missed_answer_hours = 0"}},
		{"max_mcp_sessions_per_token = 0\n", nil, []string{"max_mcp_sessions_per_token = 0"}},
		{"max_relay_sessions_per_token = 0\n", nil, []string{"max_relay_sessions_per_token = 0", "1 or more"}},
		{"max_relay_connections_per_token = -1\n", nil, []string{"max_relay_connections_per_token = -1", "1 or more"}},
		{"max_relay_state_bytes_per_token = 0\n", nil, []string{"max_relay_state_bytes_per_token = 0", "1 or more"}},
		{"relay_call_timeout_seconds = 0\n", nil, []string{"relay_call_timeout_seconds = 0"}},
		{"max_study_logs_per_token = 0\n", nil, []string{"max_study_logs_per_token = 0", "1 or more"}},
		{"max_study_log_bytes_per_token = 1000\n", nil, []string{"max_study_log_bytes_per_token = 1000", "65536 or more"}},
		{"body_timeout_seconds = 0\n", nil, []string{"body_timeout_seconds = 0"}},
		{"agui_frontend_grace_seconds = -1\n", nil, []string{"agui_frontend_grace_seconds = -1"}},
		{"agui_max_threads_per_token = 0\n", nil, []string{"agui_max_threads_per_token = 0"}},
		{"agui_agent_wait_seconds = 0\n", nil, []string{"agui_agent_wait_seconds = 0"}},
		{"agui_agent_idle_seconds = -300\n", nil, []string{"agui_agent_idle_seconds = -300"}},
		{"orchestrator_url = \"ftp://x\"\n", nil, []string{`orchestrator_url (-orchestrator-url) = "ftp://x"`, "http(s)://"}},
		{"orchestrator_token = \"secret-orchestrator\"\n", nil, []string{"orchestrator_token", "only with orchestrator_url"}},
		{"orchestrator_timeout_seconds = 5\n", nil, []string{"orchestrator_timeout_seconds = 5", "only with orchestrator_url"}},
		{"orchestrator_url = \"http://127.0.0.1:1\"\norchestrator_timeout_seconds = 0\n", nil, []string{"orchestrator_timeout_seconds = 0"}},
		{"ingress_replay_seconds = 0\n", nil, []string{"ingress_replay_seconds = 0"}},
		{"ingress_approval_timeout_seconds = -1\n", nil, []string{"ingress_approval_timeout_seconds = -1"}},
		{"ingress_replay_bytes = 0\n", nil, []string{"ingress_replay_bytes = 0"}},
		{"ingress_replay_total_bytes = -1\n", nil, []string{"ingress_replay_total_bytes = -1"}},
		{"ingress_agent_wait_seconds = 0\n", nil, []string{"ingress_agent_wait_seconds = 0"}},
		{"tls_cert = \"/nonexistent.pem\"\ntls_key = \"/nonexistent.key\"\n", nil, []string{`tls_cert (-tls-cert) = "/nonexistent.pem"`, "no such file"}},
		{"tls_cert = \"/nonexistent.pem\"\n", nil, []string{`tls_key (-tls-key) = ""`, "set with tls_cert"}},
		{"", []string{"-tls-key", "k.pem"}, []string{`tls_cert (-tls-cert) = ""`, "set with tls_key"}},
	} {
		name := strings.TrimSpace(c.body + strings.Join(c.args, " "))
		t.Run(name, func(t *testing.T) {
			stdout, data, err := start(t, c.body, c.args...)
			if err == nil {
				t.Fatalf("accepted; printed %q", stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-orchestrator") || strings.Contains(err.Error(), "has a space") {
				t.Errorf("error %q shows a token", err)
			}
			if stdout != "" || len(data) != 0 {
				t.Errorf("refused only after printing %q and creating %v", stdout, data)
			}
		})
	}
}

// TestPossibleSettings: what the README documents, zero where it means
// the default or off included, still starts.
func TestPossibleSettings(t *testing.T) {
	for _, body := range []string{
		"",
		"ping_interval_seconds = 20\npong_wait_seconds = 25\n",
		"pong_wait_seconds = 31\n",
		"procs = 0\nagentassistant_server_port = 0\n",
		"allowed_origins = [\"http://localhost:5173\", \"https://[::1]:8443\", \"chrome-extension://abcdef\"]\nallowed_hosts = [\"mybox.lan\", \"10.0.0.2\", \"fe80::1\"]\n",
		"max_unauthenticated_message_bytes = 1024\nhistory_days = 1\nmissed_answer_hours = 1\n",
		"orchestrator_url = \"http://127.0.0.1:1/base\"\norchestrator_token = \"x\"\norchestrator_timeout_seconds = 3\n",
		"agentassistant_server_host = \"::1\"\n",
	} {
		t.Run(body, func(t *testing.T) {
			if stdout, _, err := start(t, body); err != nil || !strings.Contains(stdout, "is running") {
				t.Fatalf("refused: %v; printed %q", err, stdout)
			}
		})
	}
}

// TestEmptyDataDir: README documents data_dir = "" as the default, the
// user config directory's agentassistant/, not the working directory.
func TestEmptyDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	file := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(file, []byte("data_dir = \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-config", file, "-port", "0"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, "agentassistant", "token")); err != nil {
		t.Fatalf("the token is not in the default data directory: %v", err)
	}
}

// TestTLSPair: a certificate and key that load are served as HTTPS.
func TestTLSPair(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writePair(t, cert, key)
	stdout, _, err := start(t, "", "-tls-cert", cert, "-tls-key", key)
	if err != nil || !strings.Contains(stdout, "https://127.0.0.1:") {
		t.Fatalf("refused a good pair: %v; printed %q", err, stdout)
	}
	// The key of another certificate is refused.
	writePair(t, filepath.Join(dir, "c2.pem"), key)
	if stdout, data, err := start(t, "", "-tls-cert", cert, "-tls-key", key); err == nil || !strings.Contains(err.Error(), "tls_cert") || stdout != "" || len(data) != 0 {
		t.Fatalf("a key that is not the certificate's: %v; printed %q, created %v", err, stdout, data)
	}
}

func writePair(t *testing.T, certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestREADMEConfigStarts: the agentassistant-srv.toml docs/configuration.md shows, every
// setting spelt out at its default, starts the server as it is (only the
// port is made free for the test).
func TestREADMEConfigStarts(t *testing.T) {
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "`agentassistant-srv.toml`:")
	if !ok {
		t.Fatal("README has no agentassistant-srv.toml block")
	}
	_, rest, _ = strings.Cut(rest, "```toml\n")
	block, _, _ := strings.Cut(rest, "```")
	port := regexp.MustCompile(`(?m)^agentassistant_server_port = \d+`)
	if !port.MatchString(block) {
		t.Fatal("README's block sets no port")
	}
	block = port.ReplaceAllString(block, "agentassistant_server_port = 0")
	if stdout, _, err := start(t, block); err != nil || !strings.Contains(stdout, "is running") {
		t.Fatalf("README's agentassistant-srv.toml: %v\n%s", err, stdout)
	}
}
