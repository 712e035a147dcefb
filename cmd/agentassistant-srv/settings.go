package main

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/srv/catalog"

	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// maxReplicas is the most replicas JetStream gives a stream or bucket.
const maxReplicas = 5

// checkSettings refuses every setting that cannot work, before anything is
// created or announced: a value outside its range, one that contradicts
// another, or one that applies only with a setting left empty. A setting
// not given keeps its default (the library's, for a zero value).
func checkSettings(fs *config.Flags, cfg *fileConfig) error {
	c := fs.Check()
	if cfg.Host != "" && !config.HostName(cfg.Host) {
		c.Bad("agentassistant_server_host", "host", cfg.Host, "it must be a host name or an IP address, without scheme, port or path (e.g. \"0.0.0.0\")")
	}
	c.Int("agentassistant_server_port", "port", int64(cfg.Port), 0, 65535, "it must be from 0 to 65535 (0 picks a free port)")
	if cfg.Token != "" {
		if err := auth.Check(cfg.Token); err != nil {
			c.Bad("agentassistant_server_token", "token", "…", err.Error()) // never the token itself
		}
	}
	for i, tok := range cfg.Tokens {
		if err := auth.Check(tok); err != nil {
			c.Bad(fmt.Sprintf("tokens[%d]", i), "", "…", err.Error())
		}
	}
	if c.Set("data_dir", "data") && cfg.DataDir == "" {
		cfg.DataDir = config.AppDir() // README: empty is the default
	}
	for _, h := range cfg.AllowedHosts {
		if !config.HostName(h) {
			c.Bad("allowed_hosts", "", h, "each must be a host name or an IP address as the Host header names it, without scheme, port or path (e.g. \"mybox.lan\")")
		}
	}
	for _, o := range cfg.AllowedOrigins {
		if err := config.Origin(o); err != nil {
			c.Bad("allowed_origins", "", o, err.Error())
		}
	}
	c.LogLevel(cfg.LogLevel)
	switch {
	case cfg.TLSCert != "" && cfg.TLSKey == "":
		c.Bad("tls_key", "tls-key", cfg.TLSKey, "it must be set with tls_cert: HTTPS needs both")
	case cfg.TLSCert == "" && cfg.TLSKey != "":
		c.Bad("tls_cert", "tls-cert", cfg.TLSCert, "it must be set with tls_key: HTTPS needs both")
	case cfg.TLSCert != "":
		// The pair is loaded again when serving; loading it here refuses a
		// missing or wrong file before the server says it is running.
		if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			c.Bad("tls_cert", "tls-cert", cfg.TLSCert, fmt.Sprintf("with tls_key %q it must be a PEM certificate and its key: %v", cfg.TLSKey, err))
		}
	}

	c.Count("max_connections_per_token", "", int64(cfg.MaxPerToken), 1)
	c.Duration("orphan_grace_seconds", "", cfg.OrphanGrace, time.Second)
	c.Duration("ping_interval_seconds", "", cfg.PingInterval, time.Second)
	c.Duration("pong_wait_seconds", "", cfg.PongWait, time.Second)
	c.Duration("write_wait_seconds", "", cfg.WriteWait, time.Second)
	pingSet, pongSet := c.Set("ping_interval_seconds", ""), c.Set("pong_wait_seconds", "")
	if (pingSet || pongSet) && (!pingSet || cfg.PingInterval > 0) && (!pongSet || cfg.PongWait > 0) {
		w := wsconn.Options{PingInterval: secs(cfg.PingInterval), PongWait: secs(cfg.PongWait)}
		w.Defaults() // what is not set is the default
		ping, pong := int(w.PingInterval/time.Second), int(w.PongWait/time.Second)
		why := ": a peer that only answers pings would be counted dead between them"
		switch {
		case w.PingInterval < w.PongWait:
		case pingSet:
			c.Bad("ping_interval_seconds", "", ping, fmt.Sprintf("it must be below pong_wait_seconds (%d)%s", pong, why))
		default:
			c.Bad("pong_wait_seconds", "", pong, fmt.Sprintf("it must be above ping_interval_seconds (%d)%s", ping, why))
		}
	}
	c.Duration("login_timeout_seconds", "", cfg.LoginTimeout, time.Second)
	c.Duration("host_grace_seconds", "", cfg.HostGrace, time.Second)
	c.Duration("history_days", "", cfg.HistoryDays, 24*time.Hour)
	c.Duration("missed_answer_hours", "", cfg.MissedHours, time.Hour)
	c.Int("procs", "", int64(cfg.Procs), 0, 1024, "it must be from 0 (the Go runtime's choice) to 1024")
	c.Count("max_mcp_sessions_per_token", "", int64(cfg.MaxMCPSessions), 1)
	c.Count("max_relay_sessions_per_token", "", int64(cfg.RelayMaxSessions), 1)
	c.Count("max_relay_connections_per_token", "", int64(cfg.RelayMaxConns), 1)
	c.Count("max_relay_state_bytes_per_token", "", cfg.RelayStateBytes, 1)
	c.Duration("relay_call_timeout_seconds", "", cfg.RelayCallTimeout, time.Second)
	c.Count("max_study_logs_per_token", "", int64(cfg.StudyLogMaxFiles), 1)
	c.Count("max_study_log_bytes_per_token", "", cfg.StudyLogMaxBytes, 64<<10)
	c.Count("max_unauthenticated_connections", "", int64(cfg.MaxUnauthConns), 1)
	c.Count("max_unauthenticated_per_address", "", int64(cfg.MaxUnauthPerAddr), 1)
	c.Count("max_idle_connections", "max-idle-connections", int64(cfg.MaxIdleConns), 1)
	c.Count("max_idle_connections_per_address", "max-idle-connections-per-address", int64(cfg.MaxIdlePerAddr), 1)
	c.Int("max_unauthenticated_message_bytes", "", int64(cfg.MaxUnauthMessage), 1024, 16<<20,
		"it must be from 1024 (a login must fit) to 16777216 (the most any message may be once the token is shown)")
	c.Duration("body_timeout_seconds", "", cfg.BodyTimeout, time.Second)
	c.Count("agui_max_body_bytes", "", cfg.AGUIMaxBody, 1)
	c.Duration("agui_frontend_grace_seconds", "", cfg.AGUIFrontendGrace, time.Second)
	c.Count("agui_max_threads_per_token", "", int64(cfg.AGUIMaxThreads), 1)
	c.Duration("agui_agent_wait_seconds", "", cfg.AGUIAgentWait, time.Second)
	c.Duration("agui_agent_idle_seconds", "", cfg.AGUIAgentIdle, time.Second)

	if cfg.OrchestratorURL != "" {
		if u, err := url.Parse(cfg.OrchestratorURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.Bad("orchestrator_url", "orchestrator-url", cfg.OrchestratorURL, "it must be http(s)://host[:port][/path], or empty (the token's MCP agent runs Ingress runs)")
		}
	}
	if cfg.Catalog != "" {
		if _, err := catalog.Load(cfg.Catalog); err != nil {
			c.Bad("booking_catalog", "", cfg.Catalog, fmt.Sprintf("it must be a readable catalog file, or empty (the built-in one): %v", err))
		}
	}
	orch := cfg.OrchestratorURL != ""
	c.Needs("orchestrator_token", "", "…", cfg.OrchestratorToken == "", "orchestrator_url", orch)
	c.Needs("orchestrator_timeout_seconds", "", cfg.OrchestratorTimeout, cfg.OrchestratorTimeout == defaultOrchestratorTimeout, "orchestrator_url", orch)
	c.Duration("orchestrator_timeout_seconds", "", cfg.OrchestratorTimeout, time.Second)
	c.Duration("ingress_replay_seconds", "", cfg.IngressReplay, time.Second)
	c.Duration("ingress_approval_timeout_seconds", "", cfg.IngressApproval, time.Second)
	c.Count("ingress_replay_bytes", "", cfg.IngressReplayBytes, 1)
	c.Count("ingress_replay_total_bytes", "", cfg.IngressReplayTotal, 1)
	c.Duration("ingress_agent_wait_seconds", "", cfg.IngressAgentWait, time.Second)

	nats := cfg.NATSURL != ""
	if nats {
		for _, s := range strings.Split(cfg.NATSURL, ",") {
			if strings.TrimSpace(s) == "" {
				c.Bad("nats_url", "nats-url", cfg.NATSURL, "it must be NATS server URLs, comma-separated (e.g. \"nats://10.0.0.1:4222,nats://10.0.0.2:4222\"), or empty (one process)")
				break
			}
		}
	}
	c.Needs("nats_replicas", "", cfg.NATSReplicas, cfg.NATSReplicas == defaultNATSReplicas, "nats_url", nats)
	c.Int("nats_replicas", "", int64(cfg.NATSReplicas), 0, maxReplicas, fmt.Sprintf("it must be from 1 to %d (what JetStream allows), at most the JetStream servers there are, or 0 (3 with several nats_url servers, else 1)", maxReplicas))
	c.Needs("instance_name", "instance", cfg.Instance, cfg.Instance == "", "nats_url", nats)
	c.Needs("history_scan", "", cfg.HistoryScan, cfg.HistoryScan == defaultHistoryScan, "nats_url", nats)
	c.Count("history_scan", "", int64(cfg.HistoryScan), 1)
	return c.Err()
}

// The defaults of settings that apply only with another one set: a file
// may spell them out without it (README's does).
const (
	defaultOrchestratorTimeout = 10    // ingress.HTTPOptions.Timeout's, in seconds
	defaultNATSReplicas        = 0     // cluster.Options.Replicas' (0: by the servers named)
	defaultHistoryScan         = 10000 // cluster.Options.HistoryScan's
)
