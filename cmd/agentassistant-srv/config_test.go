package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/config"
)

// loadConfig reads the config file body (and args) as run does.
func loadConfig(t *testing.T, body string, args ...string) (fileConfig, *config.Flags, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg fileConfig
	fs := newFlags(&cfg, io.Discard)
	if err := fs.Parse(append([]string{"-config", file}, args...)); err != nil {
		t.Fatal(err)
	}
	_, err := fs.Load(&cfg)
	return cfg, fs, err
}

// doc is a config file setting key ("table.key" or a top-level key) to
// the TOML value v.
func doc(key, v string) string {
	if table, k, ok := strings.Cut(key, "."); ok {
		return fmt.Sprintf("[%s]\n%s = %s\n", table, k, v)
	}
	return fmt.Sprintf("%s = %s\n", key, v)
}

// setting is one key of agentassistant-srv.toml, a value for it, and
// where that value must arrive.
type setting struct {
	key, value string
	reach      func(fileConfig, tuning) []any
	want       any
}

func s(v ...any) []any { return v }

var settings = []setting{
	{"agentassistant_server_host", `"::1"`, func(c fileConfig, _ tuning) []any { return s(c.Host) }, "::1"},
	{"agentassistant_server_port", `1234`, func(c fileConfig, _ tuning) []any { return s(c.Port) }, 1234},
	{"agentassistant_server_token", `"tok-0123456789abcdef"`, func(c fileConfig, _ tuning) []any { return s(c.Token) }, "tok-0123456789abcdef"},
	{"server.tokens", `["t1-0123456789abcdef"]`, func(c fileConfig, _ tuning) []any { return s(c.Server.Tokens) }, []string{"t1-0123456789abcdef"}},
	{"server.data_dir", `"/srv/aa"`, func(c fileConfig, _ tuning) []any { return s(c.Server.DataDir) }, "/srv/aa"},
	{"server.allowed_hosts", `["mybox.lan"]`, func(c fileConfig, _ tuning) []any { return s(c.Server.AllowedHosts) }, []string{"mybox.lan"}},
	{"server.allowed_origins", `["http://localhost:5173"]`, func(c fileConfig, _ tuning) []any { return s(c.Server.AllowedOrigins) }, []string{"http://localhost:5173"}},
	{"server.tls_cert", `"c.pem"`, func(c fileConfig, _ tuning) []any { return s(c.Server.TLSCert) }, "c.pem"},
	{"server.tls_key", `"k.pem"`, func(c fileConfig, _ tuning) []any { return s(c.Server.TLSKey) }, "k.pem"},
	{"server.log_level", `"debug"`, func(c fileConfig, _ tuning) []any { return s(c.Server.LogLevel) }, "debug"},
	{"server.procs", `3`, func(c fileConfig, _ tuning) []any { return s(c.Server.Procs) }, 3},

	{"limits.inbox_connections_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Inbox.MaxPerToken) }, 7},
	{"limits.mcp_sessions_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.MCP.MaxSessions) }, 7},
	{"limits.unauthenticated_connections", `7`, func(_ fileConfig, t tuning) []any { return s(t.Pending[0]) }, 7},
	{"limits.unauthenticated_per_address", `7`, func(_ fileConfig, t tuning) []any { return s(t.Pending[1]) }, 7},
	{"limits.unauthenticated_message_bytes", `2048`, func(_ fileConfig, t tuning) []any { return s(t.Server.MaxUnauthMessage) }, 2048},
	{"limits.body_timeout", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.BodyTimeout) }, 7 * time.Second},
	{"limits.idle_connections", `7`, func(_ fileConfig, t tuning) []any { return s(t.Idle[0]) }, 7},
	{"limits.idle_connections_per_address", `7`, func(_ fileConfig, t tuning) []any { return s(t.Idle[1]) }, 7},

	{"websocket.ping_interval", `"7s"`, func(_ fileConfig, t tuning) []any {
		return s(t.Server.Inbox.PingInterval, t.Server.Relay.Conn.PingInterval, t.Server.Ingress.Conn.PingInterval)
	}, 7 * time.Second},
	{"websocket.pong_wait", `"70s"`, func(_ fileConfig, t tuning) []any {
		return s(t.Server.Inbox.PongWait, t.Server.Relay.Conn.PongWait, t.Server.Ingress.Conn.PongWait)
	}, 70 * time.Second},
	{"websocket.write_wait", `"7s"`, func(_ fileConfig, t tuning) []any {
		return s(t.Server.Inbox.WriteWait, t.Server.Relay.Conn.WriteWait, t.Server.Ingress.Conn.WriteWait)
	}, 7 * time.Second},
	{"websocket.login_timeout", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Inbox.LoginTimeout) }, 7 * time.Second},

	{"requests.orphan_grace", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.OrphanGrace) }, 7 * time.Second},
	{"requests.history", `"48h"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.HistoryRetention, t.Cluster.History) }, 48 * time.Hour},
	{"requests.missed_answers", `"5h"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.MissedRetention) }, 5 * time.Hour},
	{"requests.max_missed_bytes_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.MissedBytes) }, int64(7)},
	{"requests.max_outcome_bytes_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.RetentionBytes) }, int64(7)},
	{"requests.max_pending_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.MaxPending) }, 7},
	{"requests.max_pending_bytes_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Hub.MaxPendingBytes) }, int64(7)},
	{"requests.max_history_bytes_per_token", `7000000`, func(_ fileConfig, t tuning) []any { return s(t.Store.HistoryBytes, t.Cluster.HistoryBytes) }, int64(7000000)},
	{"requests.fsync", `true`, func(_ fileConfig, t tuning) []any { return s(t.Store.Sync) }, true},

	{"relay.max_sessions_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Relay.MaxSessionsPerToken) }, 7},
	{"relay.max_connections_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Relay.MaxConnsPerToken) }, 7},
	{"relay.max_state_bytes_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Relay.MaxStatePerToken) }, int64(7)},
	{"relay.call_timeout", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Relay.CallTimeout) }, 7 * time.Second},
	{"relay.host_grace", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Relay.HostGrace, t.Server.MCP.Bridge.HostGrace) }, 7 * time.Second},
	{"relay.booking_catalog", `"films.json"`, func(c fileConfig, _ tuning) []any { return s(c.Relay.BookingCatalog) }, "films.json"},

	{"studylog.fsync", `true`, func(_ fileConfig, t tuning) []any { return s(t.StudyLog.Sync) }, true},
	{"studylog.max_files_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.StudyLog.MaxFilesPerOwner) }, 7},
	{"studylog.max_bytes_per_token", `70000`, func(_ fileConfig, t tuning) []any { return s(t.StudyLog.MaxBytesPerOwner) }, int64(70000)},

	{"agui.max_body_bytes", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.AGUI.MaxBody) }, int64(7)},
	{"agui.frontend_grace", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.AGUI.FrontendGrace) }, 7 * time.Second},
	{"agui.max_threads_per_token", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.AGUI.MaxThreadsPerToken) }, 7},
	{"agui.agent_wait", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.AGUI.AgentWait) }, 7 * time.Second},
	{"agui.agent_idle", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.AGUI.AgentIdle) }, 7 * time.Second},

	{"ingress.orchestrator_url", `"http://orch:1"`, func(_ fileConfig, t tuning) []any { return s(t.Orchestrator.URL) }, "http://orch:1"},
	{"ingress.orchestrator_token", `"o-tok"`, func(_ fileConfig, t tuning) []any { return s(t.Orchestrator.Token) }, "o-tok"},
	{"ingress.orchestrator_timeout", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Orchestrator.Timeout) }, 7 * time.Second},
	{"ingress.replay_window", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Ingress.ReplayWindow) }, 7 * time.Second},
	{"ingress.approval_timeout", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Ingress.ApprovalTimeout) }, 7 * time.Second},
	{"ingress.replay_bytes", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Ingress.ReplayBytes) }, int64(7)},
	{"ingress.replay_total_bytes", `7`, func(_ fileConfig, t tuning) []any { return s(t.Server.Ingress.ReplayTotalBytes) }, int64(7)},
	{"ingress.agent_wait", `"7s"`, func(_ fileConfig, t tuning) []any { return s(t.Server.Ingress.AgentWait) }, 7 * time.Second},

	{"cluster.nats_url", `"nats://n:4222"`, func(_ fileConfig, t tuning) []any { return s(t.Cluster.URL) }, "nats://n:4222"},
	{"cluster.replicas", `3`, func(_ fileConfig, t tuning) []any { return s(t.Cluster.Replicas) }, 3},
	{"cluster.instance", `"i1"`, func(_ fileConfig, t tuning) []any { return s(t.Cluster.Instance) }, "i1"},
	{"cluster.history_scan", `7`, func(_ fileConfig, t tuning) []any { return s(t.Cluster.HistoryScan) }, 7},

	{"push.allow_private_endpoints", `true`, func(_ fileConfig, t tuning) []any { return s(t.Push.AllowPrivateEndpoints) }, true},
}

// TestEveryKeyReachesItsOptions: each key of agentassistant-srv.toml, set
// in its table, arrives in the options of every part it tunes, changed
// from its default; and every key the server has is in this table.
func TestEveryKeyReachesItsOptions(t *testing.T) {
	var keys []string
	for _, st := range settings {
		keys = append(keys, st.key)
		t.Run(st.key, func(t *testing.T) {
			cfg, fs, err := loadConfig(t, doc(st.key, st.value))
			if err != nil {
				t.Fatal(err)
			}
			if len(fs.Moved()) != 0 {
				t.Errorf("warned %v", fs.Moved())
			}
			for i, got := range st.reach(cfg, tune(&cfg)) {
				if !reflect.DeepEqual(got, st.want) {
					t.Errorf("place %d: %#v, want %#v", i, got, st.want)
				}
			}
			def := defaults()
			for i, got := range st.reach(def, tune(&def)) {
				if reflect.DeepEqual(got, st.want) {
					t.Errorf("place %d: the default is already %#v: the test shows nothing", i, got)
				}
			}
		})
	}
	for _, k := range tomlKeys(fileConfig{}) {
		if !strings.HasPrefix(k, "channels.") && !slices.Contains(keys, k) {
			t.Errorf("%s is not in this test", k)
		}
	}
}

// oldValue is the value of a setting under the old key of m: a duration
// as a whole number of m.Unit.
func oldValue(t *testing.T, m config.Move, v string) string {
	t.Helper()
	if m.Unit == 0 {
		return v
	}
	d, err := time.ParseDuration(strings.Trim(v, `"`))
	if err != nil || d%m.Unit != 0 {
		t.Fatalf("%s: %s is no whole number of %v", m.New, v, m.Unit)
	}
	return fmt.Sprint(int64(d / m.Unit))
}

// TestOldKeysStillWork: every flat key of the first releases still sets
// its setting as the new key does, and says which key to write instead;
// the agentassistant_server_* keys are not old.
func TestOldKeysStillWork(t *testing.T) {
	for _, m := range moves {
		i := slices.IndexFunc(settings, func(st setting) bool { return st.key == m.New })
		if i < 0 {
			t.Errorf("%s moved to %s, which is no setting", m.Old, m.New)
			continue
		}
		st := settings[i]
		t.Run(m.Old, func(t *testing.T) {
			v := oldValue(t, m, st.value)
			cfg, fs, err := loadConfig(t, doc(m.Old, v))
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range st.reach(cfg, tune(&cfg)) {
				if !reflect.DeepEqual(got, st.want) {
					t.Errorf("place %d: %#v, want %#v", i, got, st.want)
				}
			}
			table, key, _ := strings.Cut(m.New, ".")
			want := fmt.Sprintf("%s is deprecated; use [%s] %s", m.Old, table, key)
			if m.Unit != 0 {
				want += " = " + st.value
			}
			if w := fs.Moved(); len(w) != 1 || w[0].String() != want {
				t.Errorf("warned %v, want %q", w, want)
			}
		})
	}
	for _, k := range []string{"agentassistant_server_host", "agentassistant_server_port", "agentassistant_server_token"} {
		if slices.ContainsFunc(moves, func(m config.Move) bool { return m.Old == k }) {
			t.Errorf("%s is the key every agentassistant config has: it must not be old", k)
		}
	}
}

// runLogs runs the server on the config body until it has started, and
// returns what it logged.
func runLogs(t *testing.T, body string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "srv.toml")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"-config", file, "-data", filepath.Join(dir, "data"), "-port", "0"}, &out, &errOut)
	return errOut.String(), err
}

// TestOldKeyWarns: the server started with an old key logs one warning
// for it, naming the new key and the value to write, and none for the
// keys every agentassistant config has.
func TestOldKeyWarns(t *testing.T) {
	logs, err := runLogs(t, "agentassistant_server_host = \"127.0.0.1\"\nping_interval_seconds = 20\n")
	if err != nil {
		t.Fatal(err)
	}
	want := `level=WARN msg="ping_interval_seconds is deprecated; use [websocket] ping_interval = \"20s\""`
	if strings.Count(logs, "level=WARN") != 1 || !strings.Contains(logs, want) {
		t.Fatalf("logged:\n%s\nwant one warning %s", logs, want)
	}
	if logs, err := runLogs(t, "agentassistant_server_host = \"127.0.0.1\"\n[websocket]\nping_interval = \"20s\"\n"); err != nil || strings.Contains(logs, "level=WARN") {
		t.Fatalf("the new key: %v\n%s", err, logs)
	}
}

// TestConfigErrors: a setting given under both names, a duration that is
// none, a bare number for a duration, an unknown key: each is refused at
// start, naming the key.
func TestConfigErrors(t *testing.T) {
	for body, want := range map[string]string{
		"ping_interval_seconds = 20\n[websocket]\nping_interval = \"20s\"\n":      "ping_interval_seconds and [websocket] ping_interval are the same setting",
		"nats_url = \"nats://a:4222\"\n[cluster]\nnats_url = \"nats://a:4222\"\n": "nats_url and [cluster] nats_url are the same setting",
		"[websocket]\nping_interval = \"often\"\n":                                "websocket.ping_interval",
		"[requests]\nhistory = \"30d\"\n":                                         "requests.history",
		"[relay]\ncall_timeout = 20\n":                                            `"20" is no duration`,
		"[websocket]\nping_interval_seconds = 20\n":                               "unknown keys: websocket.ping_interval_seconds",
		"ping_interval = \"20s\"\n":                                               "unknown keys: ping_interval",
	} {
		stdout, data, err := start(t, body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
		if stdout != "" || len(data) != 0 {
			t.Errorf("%q: refused only after printing %q and creating %v", body, stdout, data)
		}
	}
}

// TestDocumentedDefaults: the agentassistant-srv.toml of
// docs/configuration.md shows every setting at its default: read, it is
// defaults() (the data directory "" standing for its default).
func TestDocumentedDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), srvBlockIntro)
	if !ok {
		t.Fatal("docs/configuration.md has no agentassistant-srv.toml block")
	}
	_, rest, _ = strings.Cut(rest, "```toml\n")
	block, _, _ := strings.Cut(rest, "```")
	if !strings.Contains(block, "[server]") {
		t.Fatalf("the block read is not the agentassistant-srv.toml:\n%s", block)
	}
	cfg, fs, err := loadConfig(t, block)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Moved()) != 0 {
		t.Errorf("the documented file uses old keys: %v", fs.Moved())
	}
	want := defaults()
	if cfg.Server.DataDir == "" {
		cfg.Server.DataDir = want.Server.DataDir
	}
	cfg.Channels = want.Channels
	got, wantV := reflect.ValueOf(cfg), reflect.ValueOf(want)
	for i := range got.NumField() {
		// %+v: an empty list (tokens = []) is the nil default
		if fmt.Sprintf("%+v", got.Field(i).Interface()) != fmt.Sprintf("%+v", wantV.Field(i).Interface()) {
			t.Errorf("%s: documented %+v, default %+v", got.Type().Field(i).Name, got.Field(i).Interface(), wantV.Field(i).Interface())
		}
	}
}
