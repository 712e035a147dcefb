package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/srv/catalog"

	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// maxReplicas is the most replicas JetStream gives a stream or bucket.
const maxReplicas = 5

// checkSettings refuses every setting that cannot work, before anything is
// created or announced: a value outside its range, one that contradicts
// another, or one that applies only with a setting left empty. A setting
// not given keeps its default (defaults()).
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
	for i, tok := range cfg.Server.Tokens {
		if err := auth.Check(tok); err != nil {
			c.Bad(fmt.Sprintf("server.tokens[%d]", i), "", "…", err.Error())
		}
	}
	sv := cfg.Server
	if c.Set("server.data_dir", "data") && sv.DataDir == "" {
		cfg.Server.DataDir = config.AppDir() // the docs: empty is the default
	}
	for _, h := range sv.AllowedHosts {
		if !config.HostName(h) {
			c.Bad("server.allowed_hosts", "", h, "each must be a host name or an IP address as the Host header names it, without scheme, port or path (e.g. \"mybox.lan\")")
		}
	}
	for _, o := range sv.AllowedOrigins {
		if err := config.Origin(o); err != nil {
			c.Bad("server.allowed_origins", "", o, err.Error())
		}
	}
	c.Level("server.log_level", "log-level", sv.LogLevel)
	switch {
	case sv.TLSCert != "" && sv.TLSKey == "":
		c.Bad("server.tls_key", "tls-key", sv.TLSKey, "it must be set with tls_cert: HTTPS needs both")
	case sv.TLSCert == "" && sv.TLSKey != "":
		c.Bad("server.tls_cert", "tls-cert", sv.TLSCert, "it must be set with tls_key: HTTPS needs both")
	case sv.TLSCert != "":
		// The pair is loaded again when serving; loading it here refuses a
		// missing or wrong file before the server says it is running.
		if _, err := tls.LoadX509KeyPair(sv.TLSCert, sv.TLSKey); err != nil {
			c.Bad("server.tls_cert", "tls-cert", sv.TLSCert, fmt.Sprintf("with tls_key %q it must be a PEM certificate and its key: %v", sv.TLSKey, err))
		}
	}
	c.Int("server.procs", "", int64(sv.Procs), 0, 1024, "it must be from 0 (the Go runtime's choice) to 1024")

	li := cfg.Limits
	c.Count("limits.inbox_connections_per_token", "", int64(li.InboxConnsPerToken), 1)
	c.Count("limits.mcp_sessions_per_token", "", int64(li.MCPSessionsPerToken), 1)
	c.Count("limits.unauthenticated_connections", "", int64(li.UnauthConns), 1)
	c.Count("limits.unauthenticated_per_address", "", int64(li.UnauthPerAddr), 1)
	c.Int("limits.unauthenticated_message_bytes", "", int64(li.UnauthMessageBytes), 1024, 16<<20,
		"it must be from 1024 (a login must fit) to 16777216 (the most any message may be once the token is shown)")
	c.Positive("limits.body_timeout", "", time.Duration(li.BodyTimeout))
	c.Count("limits.idle_connections", "max-idle-connections", int64(li.IdleConns), 1)
	c.Count("limits.idle_connections_per_address", "max-idle-connections-per-address", int64(li.IdleConnsPerAddr), 1)

	ws := cfg.WebSocket
	c.Positive("websocket.ping_interval", "", time.Duration(ws.PingInterval))
	c.Positive("websocket.pong_wait", "", time.Duration(ws.PongWait))
	c.Positive("websocket.write_wait", "", time.Duration(ws.WriteWait))
	c.Positive("websocket.login_timeout", "", time.Duration(ws.LoginTimeout))
	if ws.PingInterval > 0 && ws.PongWait > 0 && ws.PingInterval >= ws.PongWait {
		why := ": a peer that only answers pings would be counted dead between them"
		if c.Set("websocket.ping_interval", "") {
			c.Bad("websocket.ping_interval", "", ws.PingInterval.String(), fmt.Sprintf("it must be below pong_wait (%s)%s", ws.PongWait, why))
		} else {
			c.Bad("websocket.pong_wait", "", ws.PongWait.String(), fmt.Sprintf("it must be above ping_interval (%s)%s", ws.PingInterval, why))
		}
	}

	rq := cfg.Requests
	c.Positive("requests.orphan_grace", "", time.Duration(rq.OrphanGrace))
	c.Positive("requests.history", "", time.Duration(rq.History))
	c.Positive("requests.missed_answers", "", time.Duration(rq.MissedAnswers))
	c.Count("requests.max_missed_bytes_per_token", "", rq.MaxMissedBytes, 1)
	c.Count("requests.max_outcome_bytes_per_token", "", rq.MaxOutcomeBytes, 1)
	c.Count("requests.max_pending_per_token", "", int64(rq.MaxPending), 1)
	c.Count("requests.max_pending_bytes_per_token", "", rq.MaxPendingBytes, 1)
	// Below an answer's worth, every answer but the last would go.
	c.Count("requests.max_history_bytes_per_token", "", rq.MaxHistoryBytes, 1<<20)
	// What the history budget never deletes (pending requests, outcomes
	// for returning agents, answers kept for absent ones) is bounded by
	// these: a budget below them could not be held.
	kept := int64(0)
	for _, v := range []int64{rq.MaxPendingBytes, rq.MaxMissedBytes, rq.MaxOutcomeBytes} {
		switch {
		case v <= 0: // refused above
		case kept > math.MaxInt64-v:
			kept = math.MaxInt64
		default:
			kept += v
		}
	}
	if rq.MaxHistoryBytes >= 1<<20 && rq.MaxHistoryBytes < kept {
		c.Bad("requests.max_history_bytes_per_token", "", rq.MaxHistoryBytes, fmt.Sprintf(
			"it must be at least max_pending_bytes_per_token + max_missed_bytes_per_token + max_outcome_bytes_per_token (%d): what the history never deletes", kept))
	}

	rl := cfg.Relay
	c.Count("relay.max_sessions_per_token", "", int64(rl.MaxSessionsPerToken), 1)
	c.Count("relay.max_connections_per_token", "", int64(rl.MaxConnsPerToken), 1)
	c.Count("relay.max_state_bytes_per_token", "", rl.MaxStatePerToken, 1)
	c.Positive("relay.call_timeout", "", time.Duration(rl.CallTimeout))
	c.Positive("relay.host_grace", "", time.Duration(rl.HostGrace))
	if rl.BookingCatalog != "" {
		if _, err := catalog.Load(rl.BookingCatalog); err != nil {
			c.Bad("relay.booking_catalog", "", rl.BookingCatalog, fmt.Sprintf("it must be a readable catalog file, or empty (the built-in one): %v", err))
		}
	}

	c.Count("studylog.max_files_per_token", "", int64(cfg.StudyLog.MaxFilesPerToken), 1)
	c.Count("studylog.max_bytes_per_token", "", cfg.StudyLog.MaxBytesPerToken, 64<<10)

	ag := cfg.AGUI
	c.Count("agui.max_body_bytes", "", ag.MaxBody, 1)
	c.Positive("agui.frontend_grace", "", time.Duration(ag.FrontendGrace))
	c.Count("agui.max_threads_per_token", "", int64(ag.MaxThreadsPerToken), 1)
	c.Positive("agui.agent_wait", "", time.Duration(ag.AgentWait))
	c.Positive("agui.agent_idle", "", time.Duration(ag.AgentIdle))

	def := defaults()
	in := cfg.Ingress
	if in.OrchestratorURL != "" {
		if u, err := url.Parse(in.OrchestratorURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.Bad("ingress.orchestrator_url", "orchestrator-url", in.OrchestratorURL, "it must be http(s)://host[:port][/path], or empty (the token's MCP agent runs Ingress runs)")
		}
	}
	orch := in.OrchestratorURL != ""
	c.Needs("ingress.orchestrator_token", "", "…", in.OrchestratorToken == "", "orchestrator_url", orch)
	c.Needs("ingress.orchestrator_timeout", "", in.OrchestratorTimeout.String(), in.OrchestratorTimeout == def.Ingress.OrchestratorTimeout, "orchestrator_url", orch)
	c.Positive("ingress.orchestrator_timeout", "", time.Duration(in.OrchestratorTimeout))
	c.Positive("ingress.replay_window", "", time.Duration(in.ReplayWindow))
	c.Positive("ingress.approval_timeout", "", time.Duration(in.ApprovalTimeout))
	c.Count("ingress.replay_bytes", "", in.ReplayBytes, 1)
	c.Count("ingress.replay_total_bytes", "", in.ReplayTotalBytes, 1)
	c.Positive("ingress.agent_wait", "", time.Duration(in.AgentWait))

	cl := cfg.Cluster
	nats := cl.NATSURL != ""
	if nats {
		for _, s := range strings.Split(cl.NATSURL, ",") {
			if strings.TrimSpace(s) == "" {
				c.Bad("cluster.nats_url", "nats-url", cl.NATSURL, "it must be NATS server URLs, comma-separated (e.g. \"nats://10.0.0.1:4222,nats://10.0.0.2:4222\"), or empty (one process)")
				break
			}
		}
	}
	c.Needs("cluster.replicas", "", cl.Replicas, cl.Replicas == def.Cluster.Replicas, "nats_url", nats)
	c.Int("cluster.replicas", "", int64(cl.Replicas), 0, maxReplicas, fmt.Sprintf("it must be from 1 to %d (what JetStream allows), at most the JetStream servers there are, or 0 (3 with several nats_url servers, else 1)", maxReplicas))
	c.Needs("cluster.instance", "instance", cl.Instance, cl.Instance == "", "nats_url", nats)
	c.Needs("cluster.history_scan", "", cl.HistoryScan, cl.HistoryScan == def.Cluster.HistoryScan, "nats_url", nats)
	c.Count("cluster.history_scan", "", int64(cl.HistoryScan), 1)
	return errors.Join(c.Err(), cfg.Channels.check())
}
