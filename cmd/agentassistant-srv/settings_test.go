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
		{"[websocket]\nping_interval = \"100s\"\npong_wait = \"5s\"\n", nil, []string{`websocket.ping_interval = "100s"`, "below pong_wait (5s)"}},
		{"[websocket]\nping_interval = \"1m\"\n", nil, []string{`websocket.ping_interval = "1m"`, "below pong_wait (1m)"}},
		{"[websocket]\npong_wait = \"5s\"\n", nil, []string{`websocket.pong_wait = "5s"`, "above ping_interval (30s)"}},
		{"pong_wait_seconds = 5\n", nil, []string{`websocket.pong_wait (written as pong_wait_seconds) = "5s"`, "above ping_interval (30s)"}},
		{"[limits]\ninbox_connections_per_token = -1\n", nil, []string{"limits.inbox_connections_per_token = -1", "1 or more"}},
		{"max_connections_per_token = 0\n", nil, []string{"limits.inbox_connections_per_token (written as max_connections_per_token) = 0"}},
		{"[limits]\nunauthenticated_connections = 0\n", nil, []string{"limits.unauthenticated_connections = 0", "1 or more"}},
		{"[limits]\nunauthenticated_per_address = -1\n", nil, []string{"limits.unauthenticated_per_address = -1"}},
		{"[limits]\nidle_connections = 0\n", nil, []string{"limits.idle_connections (-max-idle-connections) = 0", "1 or more"}},
		{"", []string{"-max-idle-connections-per-address", "-5"}, []string{"limits.idle_connections_per_address (-max-idle-connections-per-address) = -5"}},
		{"[limits]\nunauthenticated_message_bytes = -10\n", nil, []string{"limits.unauthenticated_message_bytes = -10", "from 1024"}},
		{"[limits]\nunauthenticated_message_bytes = 100000000\n", nil, []string{"limits.unauthenticated_message_bytes = 100000000", "16777216"}},
		{"[requests]\nhistory = \"-72h\"\n", nil, []string{`requests.history = "-72h"`, "more than 0s"}},
		{"history_days = -3\n", nil, []string{`requests.history (written as history_days) = "-72h"`}},
		{"history_days = 200000\n", nil, []string{"history_days = 200000", "292 years"}},                             // past what a time.Duration holds
		{"[requests]\nhistory = \"2000000000h\"\n", nil, []string{"requests.history", "2562047h (about 292 years)"}}, // likewise, not "no duration"
		{"[agui]\nmax_body_bytes = 0\n", nil, []string{"agui.max_body_bytes = 0"}},
		{"[server]\nprocs = -4\n", nil, []string{"server.procs = -4", "0 (the Go runtime's choice)"}},
		{"[cluster]\nreplicas = 7\n", nil, []string{"cluster.replicas = 7", "only with nats_url", "from 1 to 5"}},
		{"nats_replicas = 3\n", nil, []string{"cluster.replicas (written as nats_replicas) = 3", "only with nats_url"}},
		{"[relay]\nbooking_catalog = \"/nonexistent/catalog.json\"\n", nil, []string{"relay.booking_catalog = \"/nonexistent/catalog.json\"", "readable catalog"}},
		{"[cluster]\ninstance = \"a\"\n", nil, []string{"cluster.instance (-instance) = \"a\"", "only with nats_url"}},
		{"", []string{"-instance", "a"}, []string{"cluster.instance (-instance)"}},
		{"[cluster]\nhistory_scan = 5\n", nil, []string{"cluster.history_scan = 5", "only with nats_url"}},
		{"[cluster]\nnats_url = \",\"\n", nil, []string{`cluster.nats_url (-nats-url) = ","`}},
		{"[server]\nallowed_origins = [\"not a url\"]\n", nil, []string{`server.allowed_origins = "not a url"`, "scheme://host[:port]"}},
		{"[server]\nallowed_origins = [\"http://x/\"]\n", nil, []string{`server.allowed_origins = "http://x/"`}},
		{"allowed_origins = [\"http://x:80\"]\n", nil, []string{`server.allowed_origins (written as allowed_origins) = "http://x:80"`, "default port 80"}},
		{"[server]\nallowed_hosts = [\"http://x\"]\n", nil, []string{`server.allowed_hosts = "http://x"`, "without scheme, port or path"}},
		{"[server]\nallowed_hosts = [\"x:80\"]\n", nil, []string{`server.allowed_hosts = "x:80"`}},
		{"agentassistant_server_port = 70000\n", nil, []string{"agentassistant_server_port (-port) = 70000", "0 to 65535"}},
		{"", []string{"-port", "-1"}, []string{"agentassistant_server_port (-port) = -1"}},
		{"agentassistant_server_host = \"http://x\"\n", nil, []string{`agentassistant_server_host (-host) = "http://x"`}},
		{"", []string{"-host", "127.0.0.1:80"}, []string{`agentassistant_server_host (-host) = "127.0.0.1:80"`}},
		{"[server]\nlog_level = \"loud\"\n", nil, []string{`server.log_level (-log-level) = "loud"`, "debug, info, warn or error"}},
		{"[server]\ntokens = [\"short\"]\n", nil, []string{"server.tokens[0]", "too short"}},
		{"", []string{"-token", "has a space"}, []string{"agentassistant_server_token (-token)", "white space"}},
		{"[requests]\norphan_grace = \"0s\"\n", nil, []string{`requests.orphan_grace = "0s"`}},
		{"[websocket]\nwrite_wait = \"-1s\"\n", nil, []string{`websocket.write_wait = "-1s"`}},
		{"[websocket]\nlogin_timeout = \"0s\"\n", nil, []string{`websocket.login_timeout = "0s"`}},
		{"[relay]\nhost_grace = \"-5s\"\n", nil, []string{`relay.host_grace = "-5s"`}},
		{"[requests]\nmissed_answers = \"0s\"\n", nil, []string{`requests.missed_answers = "0s"`}},
		{"[limits]\nmcp_sessions_per_token = 0\n", nil, []string{"limits.mcp_sessions_per_token = 0"}},
		{"[relay]\nmax_sessions_per_token = 0\n", nil, []string{"relay.max_sessions_per_token = 0", "1 or more"}},
		{"[relay]\nmax_connections_per_token = -1\n", nil, []string{"relay.max_connections_per_token = -1", "1 or more"}},
		{"[relay]\nmax_state_bytes_per_token = 0\n", nil, []string{"relay.max_state_bytes_per_token = 0", "1 or more"}},
		{"[requests]\nmax_missed_bytes_per_token = 0\n", nil, []string{"requests.max_missed_bytes_per_token = 0", "1 or more"}},
		{"[requests]\nmax_outcome_bytes_per_token = -1\n", nil, []string{"requests.max_outcome_bytes_per_token = -1", "1 or more"}},
		{"[requests]\nmax_pending_per_token = 0\n", nil, []string{"requests.max_pending_per_token = 0", "1 or more"}},
		{"[requests]\nmax_pending_bytes_per_token = -1\n", nil, []string{"requests.max_pending_bytes_per_token = -1", "1 or more"}},
		{"[requests]\nmax_history_bytes_per_token = 1000\n", nil, []string{"requests.max_history_bytes_per_token = 1000", "1048576 or more"}},
		{"[requests]\nmax_history_bytes_per_token = 100000000\n", nil, []string{"requests.max_history_bytes_per_token = 100000000", "at least max_pending_bytes_per_token + max_missed_bytes_per_token + max_outcome_bytes_per_token (167772160)"}},
		{"[requests]\nmax_pending_bytes_per_token = 9223372036854775807\nmax_missed_bytes_per_token = 9223372036854775807\n", nil, []string{"requests.max_history_bytes_per_token = 1073741824", "(9223372036854775807)"}},
		{"[relay]\ncall_timeout = \"0s\"\n", nil, []string{`relay.call_timeout = "0s"`}},
		{"[studylog]\nmax_files_per_token = 0\n", nil, []string{"studylog.max_files_per_token = 0", "1 or more"}},
		{"[studylog]\nmax_bytes_per_token = 1000\n", nil, []string{"studylog.max_bytes_per_token = 1000", "65536 or more"}},
		{"[limits]\nbody_timeout = \"0s\"\n", nil, []string{`limits.body_timeout = "0s"`}},
		{"[agui]\nfrontend_grace = \"-1s\"\n", nil, []string{`agui.frontend_grace = "-1s"`}},
		{"[agui]\nmax_threads_per_token = 0\n", nil, []string{"agui.max_threads_per_token = 0"}},
		{"[agui]\nagent_wait = \"0s\"\n", nil, []string{`agui.agent_wait = "0s"`}},
		{"[agui]\nagent_idle = \"-5m\"\n", nil, []string{`agui.agent_idle = "-5m"`}},
		{"[ingress]\norchestrator_url = \"ftp://x\"\n", nil, []string{`ingress.orchestrator_url (-orchestrator-url) = "ftp://x"`, "http(s)://"}},
		{"[ingress]\norchestrator_token = \"secret-orchestrator\"\n", nil, []string{"ingress.orchestrator_token", "only with orchestrator_url"}},
		{"[ingress]\norchestrator_timeout = \"5s\"\n", nil, []string{`ingress.orchestrator_timeout = "5s"`, "only with orchestrator_url"}},
		{"[ingress]\norchestrator_url = \"http://127.0.0.1:1\"\norchestrator_timeout = \"0s\"\n", nil, []string{`ingress.orchestrator_timeout = "0s"`}},
		{"[ingress]\nreplay_window = \"0s\"\n", nil, []string{`ingress.replay_window = "0s"`}},
		{"[ingress]\napproval_timeout = \"-1s\"\n", nil, []string{`ingress.approval_timeout = "-1s"`}},
		{"[ingress]\nreplay_bytes = 0\n", nil, []string{"ingress.replay_bytes = 0"}},
		{"[ingress]\nreplay_total_bytes = -1\n", nil, []string{"ingress.replay_total_bytes = -1"}},
		{"[ingress]\nagent_wait = \"0s\"\n", nil, []string{`ingress.agent_wait = "0s"`}},
		{"[server]\ntls_cert = \"/nonexistent.pem\"\ntls_key = \"/nonexistent.key\"\n", nil, []string{`server.tls_cert (-tls-cert) = "/nonexistent.pem"`, "no such file"}},
		{"[server]\ntls_cert = \"/nonexistent.pem\"\n", nil, []string{`server.tls_key (-tls-key) = ""`, "set with tls_cert"}},
		{"", []string{"-tls-key", "k.pem"}, []string{`server.tls_cert (-tls-cert) = ""`, "set with tls_key"}},
		// A channel that cannot work is refused with the rest, before a
		// token is made (docs/channels.md's snippets hold placeholders).
		{"[channels.webhook]\nurl = \"https://n8n.example.org/webhook/aa\"\nsecret = \"…\"\n", nil, []string{"channels.webhook", "at least 16 characters"}},
		{"[channels.ntfy]\nurl = \"https://ntfy.sh\"\n", nil, []string{"channels.ntfy", "topic"}},
		{"[channels.telegram]\nbot_token = \"123456:ABC\"\n", nil, []string{"channels.telegram", "chats"}},
		{"[channels.slack]\nbot_token = \"xoxb-1\"\n", nil, []string{"channels.slack", "app_token"}},
		{"[channels.email]\nsmtp_addr = \"smtp.example.org:587\"\nfrom = \"aa@example.org\"\nto = [\"not an address\"]\n", nil, []string{"channels.email", "no e-mail address"}},
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
		"[websocket]\nping_interval = \"20s\"\npong_wait = \"25s\"\n",
		"[websocket]\npong_wait = \"31s\"\n",
		"agentassistant_server_port = 0\n[server]\nprocs = 0\n",
		"[server]\nallowed_origins = [\"http://localhost:5173\", \"https://[::1]:8443\", \"chrome-extension://abcdef\"]\nallowed_hosts = [\"mybox.lan\", \"10.0.0.2\", \"fe80::1\"]\n",
		"[limits]\nunauthenticated_message_bytes = 1024\n[requests]\nhistory = \"24h\"\nmissed_answers = \"1h\"\n",
		"[ingress]\norchestrator_url = \"http://127.0.0.1:1/base\"\norchestrator_token = \"x\"\norchestrator_timeout = \"3s\"\n",
		"agentassistant_server_host = \"::1\"\n",
		// the flat keys of the first releases, as an older file has them
		"ping_interval_seconds = 20\npong_wait_seconds = 25\nhistory_days = 1\nmissed_answer_hours = 1\nprocs = 0\n",
	} {
		t.Run(body, func(t *testing.T) {
			if stdout, _, err := start(t, body); err != nil || !strings.Contains(stdout, "is running") {
				t.Fatalf("refused: %v; printed %q", err, stdout)
			}
		})
	}
}

// TestEmptyDataDir: the docs document data_dir = "" as the default, the
// user config directory's agentassistant/, not the working directory.
func TestEmptyDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	file := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(file, []byte("[server]\ndata_dir = \"\"\n"), 0o600); err != nil {
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
	_, rest, ok := strings.Cut(string(readme), srvBlockIntro)
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
