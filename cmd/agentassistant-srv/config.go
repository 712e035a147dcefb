package main

import (
	"io"
	"time"

	"github.com/agentassistant/agentassistant/internal/buildinfo"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/mcphttp"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/store"
	"github.com/agentassistant/agentassistant/srv/studylog"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// fileConfig is agentassistant-srv.toml: the address and token at the top,
// as every agentassistant config file names them, the rest in a table per
// part of the server. Its defaults are defaults(); docs/configuration.md
// shows them all.
type fileConfig struct {
	Host  string `toml:"agentassistant_server_host"`
	Port  int    `toml:"agentassistant_server_port"`
	Token string `toml:"agentassistant_server_token"`

	Server    serverConfig    `toml:"server"`
	Limits    limitsConfig    `toml:"limits"`
	WebSocket websocketConfig `toml:"websocket"`
	Requests  requestsConfig  `toml:"requests"`
	Relay     relayConfig     `toml:"relay"`
	StudyLog  studyLogConfig  `toml:"studylog"`
	AGUI      aguiConfig      `toml:"agui"`
	Ingress   ingressConfig   `toml:"ingress"`
	Cluster   clusterConfig   `toml:"cluster"`
	Push      pushConfig      `toml:"push"`
	// Where questions go besides the inbox (channels.go).
	Channels channelsConfig `toml:"channels"`
}

// serverConfig is [server]: who may connect, where data lives, how the
// process runs.
type serverConfig struct {
	Tokens         []string `toml:"tokens"`
	DataDir        string   `toml:"data_dir"`
	AllowedHosts   []string `toml:"allowed_hosts"`
	AllowedOrigins []string `toml:"allowed_origins"`
	TLSCert        string   `toml:"tls_cert"`
	TLSKey         string   `toml:"tls_key"`
	LogLevel       string   `toml:"log_level"`
	Procs          int      `toml:"procs"`
}

// limitsConfig is [limits]: what clients may hold, and what one may cost
// before it has shown the token.
type limitsConfig struct {
	InboxConnsPerToken  int             `toml:"inbox_connections_per_token"`
	MCPSessionsPerToken int             `toml:"mcp_sessions_per_token"`
	UnauthConns         int             `toml:"unauthenticated_connections"`
	UnauthPerAddr       int             `toml:"unauthenticated_per_address"`
	UnauthMessageBytes  int             `toml:"unauthenticated_message_bytes"`
	BodyTimeout         config.Duration `toml:"body_timeout"`
	IdleConns           int             `toml:"idle_connections"`
	IdleConnsPerAddr    int             `toml:"idle_connections_per_address"`
}

// websocketConfig is [websocket]: the heartbeat and deadlines of every
// WebSocket door.
type websocketConfig struct {
	PingInterval config.Duration `toml:"ping_interval"`
	PongWait     config.Duration `toml:"pong_wait"`
	WriteWait    config.Duration `toml:"write_wait"`
	LoginTimeout config.Duration `toml:"login_timeout"`
}

// requestsConfig is [requests]: how long agents' requests and their
// outcomes are kept, and how safely.
type requestsConfig struct {
	OrphanGrace   config.Duration `toml:"orphan_grace"`
	History       config.Duration `toml:"history"`
	MissedAnswers config.Duration `toml:"missed_answers"`
	// The bytes of the answers a token keeps for absent agents, and of
	// the outcomes it keeps for agents re-attaching.
	MaxMissedBytes  int64 `toml:"max_missed_bytes_per_token"`
	MaxOutcomeBytes int64 `toml:"max_outcome_bytes_per_token"`
	// The requests a token may have waiting for an answer, and their
	// bytes.
	MaxPending      int   `toml:"max_pending_per_token"`
	MaxPendingBytes int64 `toml:"max_pending_bytes_per_token"`
	// The bytes a token's history may take on disk.
	MaxHistoryBytes int64 `toml:"max_history_bytes_per_token"`
	Fsync           bool  `toml:"fsync"`
}

// relayConfig is [relay]: /agent/ws, the UIs agents drive.
type relayConfig struct {
	MaxSessionsPerToken int             `toml:"max_sessions_per_token"`
	MaxConnsPerToken    int             `toml:"max_connections_per_token"`
	MaxStatePerToken    int64           `toml:"max_state_bytes_per_token"`
	CallTimeout         config.Duration `toml:"call_timeout"`
	HostGrace           config.Duration `toml:"host_grace"`
	BookingCatalog      string          `toml:"booking_catalog"`
}

// studyLogConfig is [studylog]: logs/study/*.jsonl.
type studyLogConfig struct {
	Fsync            bool  `toml:"fsync"`
	MaxFilesPerToken int   `toml:"max_files_per_token"`
	MaxBytesPerToken int64 `toml:"max_bytes_per_token"`
}

// aguiConfig is [agui]: POST /agui.
type aguiConfig struct {
	MaxBody            int64           `toml:"max_body_bytes"`
	FrontendGrace      config.Duration `toml:"frontend_grace"`
	MaxThreadsPerToken int             `toml:"max_threads_per_token"`
	AgentWait          config.Duration `toml:"agent_wait"`
	AgentIdle          config.Duration `toml:"agent_idle"`
}

// ingressConfig is [ingress]: /ingress/ws; its runs go to orchestrator_url,
// or to the token's MCP agent when it is empty.
type ingressConfig struct {
	OrchestratorURL     string          `toml:"orchestrator_url"`
	OrchestratorToken   string          `toml:"orchestrator_token"`
	OrchestratorTimeout config.Duration `toml:"orchestrator_timeout"`
	ReplayWindow        config.Duration `toml:"replay_window"`
	ApprovalTimeout     config.Duration `toml:"approval_timeout"`
	ReplayBytes         int64           `toml:"replay_bytes"`
	ReplayTotalBytes    int64           `toml:"replay_total_bytes"`
	AgentWait           config.Duration `toml:"agent_wait"`
}

// clusterConfig is [cluster]: NATS JetStream keeps the requests, shared
// with the other instances.
type clusterConfig struct {
	NATSURL     string `toml:"nats_url"`
	Replicas    int    `toml:"replicas"`
	Instance    string `toml:"instance"`
	HistoryScan int    `toml:"history_scan"`
}

// pushConfig is [push]: Web Push to the devices that turned it on
// (docs/push.md).
type pushConfig struct {
	// AllowPrivateEndpoints lets a subscription name a push service at
	// an address of this machine or a private network.
	AllowPrivateEndpoints bool `toml:"allow_private_endpoints"`
}

func dur(d time.Duration) config.Duration { return config.Duration(d) }

// defaults is every setting's default, the one place they are set for the
// server (the libraries' zero values mean the same, for their other
// users). docs/configuration.md shows them; TestDocumentedDefaults holds
// the two together.
func defaults() fileConfig {
	return fileConfig{
		Host: "127.0.0.1",
		Port: 22080,
		Server: serverConfig{
			DataDir:  config.AppDir(),
			LogLevel: "info",
		},
		Limits: limitsConfig{
			InboxConnsPerToken:  256,
			MCPSessionsPerToken: 64,
			UnauthConns:         256,
			UnauthPerAddr:       64,
			UnauthMessageBytes:  64 << 10,
			BodyTimeout:         dur(30 * time.Second),
			IdleConns:           1024,
			IdleConnsPerAddr:    256,
		},
		WebSocket: websocketConfig{ // seed 003's heartbeat
			PingInterval: dur(30 * time.Second),
			PongWait:     dur(60 * time.Second),
			WriteWait:    dur(10 * time.Second),
			LoginTimeout: dur(10 * time.Second),
		},
		Requests: requestsConfig{
			OrphanGrace:   dur(2 * time.Minute),
			History:       dur(30 * 24 * time.Hour),
			MissedAnswers: dur(24 * time.Hour),
			// Dozens of screenshots; what any one token may make the
			// server keep, on a laptop too.
			MaxMissedBytes:  64 << 20,
			MaxOutcomeBytes: 32 << 20,
			// Far more than a person answers at once; a bound on an
			// agent asking in a loop.
			MaxPending:      256,
			MaxPendingBytes: 64 << 20,
			// A person's own months of questions with screenshots
			// (a thousand of 1 MiB); a loop of the largest answers
			// fills no disk.
			MaxHistoryBytes: 1 << 30,
		},
		Relay: relayConfig{
			MaxSessionsPerToken: 64,
			MaxConnsPerToken:    256,
			MaxStatePerToken:    64 << 20,
			CallTimeout:         dur(20 * time.Second),
			HostGrace:           dur(2 * time.Minute),
		},
		StudyLog: studyLogConfig{
			MaxFilesPerToken: 10000,
			MaxBytesPerToken: 1 << 30,
		},
		AGUI: aguiConfig{
			MaxBody:            4 << 20,
			FrontendGrace:      dur(10 * time.Second),
			MaxThreadsPerToken: 64,
			AgentWait:          dur(30 * time.Second),
			AgentIdle:          dur(5 * time.Minute),
		},
		Ingress: ingressConfig{
			OrchestratorTimeout: dur(10 * time.Second),
			ReplayWindow:        dur(time.Minute),
			ApprovalTimeout:     dur(10 * time.Minute),
			ReplayBytes:         4 << 20,
			ReplayTotalBytes:    64 << 20,
			AgentWait:           dur(30 * time.Second),
		},
		Cluster: clusterConfig{
			Replicas:    0, // by the servers nats_url names
			HistoryScan: 10000,
		},
	}
}

// moves are the flat keys of the server's first releases, each read at its
// place in the tables with a warning naming it. The agentassistant_server_*
// keys are not among them: they stay at the top, where every
// agentassistant config file has them.
var moves = []config.Move{
	{Old: "tokens", New: "server.tokens"},
	{Old: "data_dir", New: "server.data_dir"},
	{Old: "allowed_hosts", New: "server.allowed_hosts"},
	{Old: "allowed_origins", New: "server.allowed_origins"},
	{Old: "tls_cert", New: "server.tls_cert"},
	{Old: "tls_key", New: "server.tls_key"},
	{Old: "log_level", New: "server.log_level"},
	{Old: "procs", New: "server.procs"},

	{Old: "max_connections_per_token", New: "limits.inbox_connections_per_token"},
	{Old: "max_mcp_sessions_per_token", New: "limits.mcp_sessions_per_token"},
	{Old: "max_unauthenticated_connections", New: "limits.unauthenticated_connections"},
	{Old: "max_unauthenticated_per_address", New: "limits.unauthenticated_per_address"},
	{Old: "max_unauthenticated_message_bytes", New: "limits.unauthenticated_message_bytes"},
	{Old: "body_timeout_seconds", New: "limits.body_timeout", Unit: time.Second},
	{Old: "max_idle_connections", New: "limits.idle_connections"},
	{Old: "max_idle_connections_per_address", New: "limits.idle_connections_per_address"},

	{Old: "ping_interval_seconds", New: "websocket.ping_interval", Unit: time.Second},
	{Old: "pong_wait_seconds", New: "websocket.pong_wait", Unit: time.Second},
	{Old: "write_wait_seconds", New: "websocket.write_wait", Unit: time.Second},
	{Old: "login_timeout_seconds", New: "websocket.login_timeout", Unit: time.Second},

	{Old: "orphan_grace_seconds", New: "requests.orphan_grace", Unit: time.Second},
	{Old: "history_days", New: "requests.history", Unit: 24 * time.Hour},
	{Old: "missed_answer_hours", New: "requests.missed_answers", Unit: time.Hour},
	{Old: "db_fsync", New: "requests.fsync"},

	{Old: "max_relay_sessions_per_token", New: "relay.max_sessions_per_token"},
	{Old: "max_relay_connections_per_token", New: "relay.max_connections_per_token"},
	{Old: "max_relay_state_bytes_per_token", New: "relay.max_state_bytes_per_token"},
	{Old: "relay_call_timeout_seconds", New: "relay.call_timeout", Unit: time.Second},
	{Old: "host_grace_seconds", New: "relay.host_grace", Unit: time.Second},
	{Old: "booking_catalog", New: "relay.booking_catalog"},

	{Old: "study_log_fsync", New: "studylog.fsync"},
	{Old: "max_study_logs_per_token", New: "studylog.max_files_per_token"},
	{Old: "max_study_log_bytes_per_token", New: "studylog.max_bytes_per_token"},

	{Old: "agui_max_body_bytes", New: "agui.max_body_bytes"},
	{Old: "agui_frontend_grace_seconds", New: "agui.frontend_grace", Unit: time.Second},
	{Old: "agui_max_threads_per_token", New: "agui.max_threads_per_token"},
	{Old: "agui_agent_wait_seconds", New: "agui.agent_wait", Unit: time.Second},
	{Old: "agui_agent_idle_seconds", New: "agui.agent_idle", Unit: time.Second},

	{Old: "orchestrator_url", New: "ingress.orchestrator_url"},
	{Old: "orchestrator_token", New: "ingress.orchestrator_token"},
	{Old: "orchestrator_timeout_seconds", New: "ingress.orchestrator_timeout", Unit: time.Second},
	{Old: "ingress_replay_seconds", New: "ingress.replay_window", Unit: time.Second},
	{Old: "ingress_approval_timeout_seconds", New: "ingress.approval_timeout", Unit: time.Second},
	{Old: "ingress_replay_bytes", New: "ingress.replay_bytes"},
	{Old: "ingress_replay_total_bytes", New: "ingress.replay_total_bytes"},
	{Old: "ingress_agent_wait_seconds", New: "ingress.agent_wait", Unit: time.Second},

	{Old: "nats_url", New: "cluster.nats_url"},
	{Old: "nats_replicas", New: "cluster.replicas"},
	{Old: "instance_name", New: "cluster.instance"},
	{Old: "history_scan", New: "cluster.history_scan"},
}

// newFlags is the server's command line over cfg, which it sets to the
// defaults.
func newFlags(cfg *fileConfig, stderr io.Writer) *config.Flags {
	*cfg = defaults()
	fs := config.NewFlags("agentassistant-srv", configName, false, stderr)
	fs.Rename(moves...)
	fs.StringSetting(&cfg.Host, "host", "address to listen on; anything but loopback needs a configured token")
	fs.IntSetting(&cfg.Port, "port", "port to listen on (0 picks a free one)")
	fs.StringSetting(&cfg.Token, "token", "token clients must present (default: generated once and kept in the data directory)")
	fs.StringSetting(&cfg.Server.DataDir, "data", "data directory (generated token, logs)")
	fs.StringSetting(&cfg.Server.LogLevel, "log-level", "debug, info, warn or error")
	fs.StringSetting(&cfg.Server.TLSCert, "tls-cert", "TLS certificate file (PEM); with -tls-key, serve HTTPS")
	fs.StringSetting(&cfg.Server.TLSKey, "tls-key", "TLS key file (PEM)")
	fs.StringSetting(&cfg.Cluster.NATSURL, "nats-url", "NATS server(s) with JetStream, comma-separated: run as one instance of a cluster (default: one process, requests in the data directory)")
	fs.StringSetting(&cfg.Cluster.Instance, "instance", "this instance's name in a cluster (default: random)")
	fs.StringSetting(&cfg.Ingress.OrchestratorURL, "orchestrator-url", "an external Ingress orchestrator's base URL (it serves /internal/invoke, ...: docs/ingress.md); empty: the token's MCP agent runs Ingress clients' runs")
	fs.IntSetting(&cfg.Limits.IdleConns, "max-idle-connections", "HTTP connections reading headers or idle between requests, in all; past it the oldest is closed")
	fs.IntSetting(&cfg.Limits.IdleConnsPerAddr, "max-idle-connections-per-address", "of those, from one address")
	return fs
}

// tuning is what the settings make of the libraries' options; run adds
// what exists only once it runs (stores, the cluster, loggers, tokens).
type tuning struct {
	StudyLog     studylog.Options
	Store        store.Options
	Cluster      cluster.Options
	Orchestrator ingress.HTTPOptions
	// Push is Web Push's options but its keys and subscriptions.
	Push push.Options
	// Pending and Idle are auth.NewPending's and srv.NewIdleConns'
	// arguments: in all, and from one address.
	Pending, Idle [2]int
	// Server holds Ingress, AGUI, Inbox, Relay, Hub and MCP.
	Server srv.Options
}

// tune maps cfg onto the options of the libraries.
func tune(cfg *fileConfig) tuning {
	d := func(v config.Duration) time.Duration { return time.Duration(v) }
	ws := cfg.WebSocket
	conn := wsconn.Options{PingInterval: d(ws.PingInterval), PongWait: d(ws.PongWait), WriteWait: d(ws.WriteWait)}
	hubOpts := hub.Options{OrphanGrace: d(cfg.Requests.OrphanGrace), HistoryRetention: d(cfg.Requests.History),
		MissedRetention: d(cfg.Requests.MissedAnswers),
		MissedBytes:     cfg.Requests.MaxMissedBytes, RetentionBytes: cfg.Requests.MaxOutcomeBytes,
		MaxPending: cfg.Requests.MaxPending, MaxPendingBytes: cfg.Requests.MaxPendingBytes}
	in := cfg.Ingress
	return tuning{
		StudyLog: studylog.Options{Sync: cfg.StudyLog.Fsync, MaxFilesPerOwner: cfg.StudyLog.MaxFilesPerToken,
			MaxBytesPerOwner: cfg.StudyLog.MaxBytesPerToken},
		Store: store.Options{Sync: cfg.Requests.Fsync, HistoryBytes: cfg.Requests.MaxHistoryBytes},
		Cluster: cluster.Options{URL: cfg.Cluster.NATSURL, Instance: cfg.Cluster.Instance, Replicas: cfg.Cluster.Replicas,
			History: hubOpts.HistoryRetention, HistoryScan: cfg.Cluster.HistoryScan, HistoryBytes: cfg.Requests.MaxHistoryBytes},
		Orchestrator: ingress.HTTPOptions{URL: in.OrchestratorURL, Token: in.OrchestratorToken, Timeout: d(in.OrchestratorTimeout)},
		Push:         push.Options{AllowPrivateEndpoints: cfg.Push.AllowPrivateEndpoints},
		Pending:      [2]int{cfg.Limits.UnauthConns, cfg.Limits.UnauthPerAddr},
		Idle:         [2]int{cfg.Limits.IdleConns, cfg.Limits.IdleConnsPerAddr},
		Server: srv.Options{
			MaxUnauthMessage: cfg.Limits.UnauthMessageBytes,
			BodyTimeout:      d(cfg.Limits.BodyTimeout),
			Ingress: ingress.Options{ReplayWindow: d(in.ReplayWindow), ApprovalTimeout: d(in.ApprovalTimeout),
				ReplayBytes: in.ReplayBytes, ReplayTotalBytes: in.ReplayTotalBytes, AgentWait: d(in.AgentWait), Conn: conn},
			AGUI: agui.Options{MaxBody: cfg.AGUI.MaxBody, FrontendGrace: d(cfg.AGUI.FrontendGrace),
				MaxThreadsPerToken: cfg.AGUI.MaxThreadsPerToken, AgentWait: d(cfg.AGUI.AgentWait), AgentIdle: d(cfg.AGUI.AgentIdle)},
			Inbox: inbox.Options{MaxPerToken: cfg.Limits.InboxConnsPerToken, PingInterval: conn.PingInterval, PongWait: conn.PongWait,
				WriteWait: conn.WriteWait, LoginTimeout: d(ws.LoginTimeout)},
			Relay: relay.Options{HostGrace: d(cfg.Relay.HostGrace), MaxSessionsPerToken: cfg.Relay.MaxSessionsPerToken,
				MaxConnsPerToken: cfg.Relay.MaxConnsPerToken, MaxStatePerToken: cfg.Relay.MaxStatePerToken,
				CallTimeout: d(cfg.Relay.CallTimeout), Conn: conn},
			Hub: hubOpts,
			MCP: mcphttp.Options{MaxSessions: cfg.Limits.MCPSessionsPerToken,
				Bridge: mcpbridge.Options{Version: buildinfo.Version(), HostGrace: d(cfg.Relay.HostGrace)}},
		},
	}
}
