// Command agentassistant-srv delivers agents' questions and task reports to
// every browser logged in under the same token, and their answers back.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/agentassistant/agentassistant/internal/buildinfo"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/catalog"
	"github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/datadir"
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

func main() {
	if runAsService() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, errStartAfresh) {
		err = startAfresh() // returns only if it cannot
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "agentassistant-srv:", err)
		os.Exit(1)
	}
}

// fileConfig is agentassistant-srv.toml.
type fileConfig struct {
	Host           string   `toml:"agentassistant_server_host"`
	Port           int      `toml:"agentassistant_server_port"`
	Token          string   `toml:"agentassistant_server_token"`
	Tokens         []string `toml:"tokens"`
	DataDir        string   `toml:"data_dir"`
	AllowedHosts   []string `toml:"allowed_hosts"`
	AllowedOrigins []string `toml:"allowed_origins"`
	LogLevel       string   `toml:"log_level"`
	StudyLogSync   bool     `toml:"study_log_fsync"`
	Catalog        string   `toml:"booking_catalog"`
	TLSCert        string   `toml:"tls_cert"`
	TLSKey         string   `toml:"tls_key"`
	MaxPerToken    int      `toml:"max_connections_per_token"`
	DBSync         bool     `toml:"db_fsync"`
	OrphanGrace    int      `toml:"orphan_grace_seconds"`
	PingInterval   int      `toml:"ping_interval_seconds"`
	PongWait       int      `toml:"pong_wait_seconds"`
	WriteWait      int      `toml:"write_wait_seconds"`
	LoginTimeout   int      `toml:"login_timeout_seconds"`
	HostGrace      int      `toml:"host_grace_seconds"`
	HistoryDays    int      `toml:"history_days"`
	MissedHours    int      `toml:"missed_answer_hours"`
	Procs          int      `toml:"procs"`
	MaxMCPSessions int      `toml:"max_mcp_sessions_per_token"`
	// /agent/ws: what one token may hold, how long a call waits.
	RelayMaxSessions int   `toml:"max_relay_sessions_per_token"`
	RelayMaxConns    int   `toml:"max_relay_connections_per_token"`
	RelayStateBytes  int64 `toml:"max_relay_state_bytes_per_token"`
	RelayCallTimeout int   `toml:"relay_call_timeout_seconds"`
	// Study logs: what one token's study sessions may write.
	StudyLogMaxFiles int   `toml:"max_study_logs_per_token"`
	StudyLogMaxBytes int64 `toml:"max_study_log_bytes_per_token"`
	// What a client may cost before it has shown the token.
	MaxUnauthConns   int `toml:"max_unauthenticated_connections"`
	MaxUnauthPerAddr int `toml:"max_unauthenticated_per_address"`
	MaxUnauthMessage int `toml:"max_unauthenticated_message_bytes"`
	BodyTimeout      int `toml:"body_timeout_seconds"`
	// HTTP connections not in a handler: reading headers, idle between
	// requests.
	MaxIdleConns   int `toml:"max_idle_connections"`
	MaxIdlePerAddr int `toml:"max_idle_connections_per_address"`
	// POST /agui.
	AGUIMaxBody       int64 `toml:"agui_max_body_bytes"`
	AGUIFrontendGrace int   `toml:"agui_frontend_grace_seconds"`
	AGUIMaxThreads    int   `toml:"agui_max_threads_per_token"`
	AGUIAgentWait     int   `toml:"agui_agent_wait_seconds"`
	AGUIAgentIdle     int   `toml:"agui_agent_idle_seconds"`
	// /ingress/ws: its runs go to orchestrator_url, or to the token's MCP
	// agent when it is empty.
	OrchestratorURL     string `toml:"orchestrator_url"`
	OrchestratorToken   string `toml:"orchestrator_token"`
	OrchestratorTimeout int    `toml:"orchestrator_timeout_seconds"`
	IngressReplay       int    `toml:"ingress_replay_seconds"`
	IngressApproval     int    `toml:"ingress_approval_timeout_seconds"`
	IngressReplayBytes  int64  `toml:"ingress_replay_bytes"`
	IngressReplayTotal  int64  `toml:"ingress_replay_total_bytes"`
	IngressAgentWait    int    `toml:"ingress_agent_wait_seconds"`
	// Cluster mode: NATS JetStream keeps the requests, shared with the
	// other instances.
	NATSURL      string `toml:"nats_url"`
	NATSReplicas int    `toml:"nats_replicas"`
	Instance     string `toml:"instance_name"`
	HistoryScan  int    `toml:"history_scan"`
	// Where questions go besides the inbox (channels.go).
	Channels channelsConfig `toml:"channels"`
}

const configName = "agentassistant-srv.toml"

// procs is how many CPUs to run Go code on at once, or 0 to leave it to
// the runtime: the GOMAXPROCS environment variable wins, then the procs
// setting; by default the runtime decides (all the CPUs, or the
// container's quota).
func procs(configured int) int {
	if os.Getenv("GOMAXPROCS") != "" || configured <= 0 {
		return 0
	}
	return configured
}

// newFlags is the server's command line, filling cfg; its defaults are
// set here.
func newFlags(cfg *fileConfig, stderr io.Writer) (fs *config.Flags, showVersion *bool) {
	*cfg = fileConfig{Host: "127.0.0.1", Port: 22080, DataDir: config.AppDir(), LogLevel: "info"}
	fs = config.NewFlags("agentassistant-srv", configName, false, stderr)
	fs.StringSetting(&cfg.Host, "host", "address to listen on; anything but loopback needs a configured token")
	fs.IntSetting(&cfg.Port, "port", "port to listen on (0 picks a free one)")
	fs.StringSetting(&cfg.Token, "token", "token clients must present (default: generated once and kept in the data directory)")
	fs.StringSetting(&cfg.DataDir, "data", "data directory (generated token, logs)")
	fs.StringSetting(&cfg.LogLevel, "log-level", "debug, info, warn or error")
	fs.StringSetting(&cfg.TLSCert, "tls-cert", "TLS certificate file (PEM); with -tls-key, serve HTTPS")
	fs.StringSetting(&cfg.TLSKey, "tls-key", "TLS key file (PEM)")
	fs.StringSetting(&cfg.NATSURL, "nats-url", "NATS server(s) with JetStream, comma-separated: run as one instance of a cluster (default: one process, requests in the data directory)")
	fs.StringSetting(&cfg.Instance, "instance", "this instance's name in a cluster (default: random)")
	fs.StringSetting(&cfg.OrchestratorURL, "orchestrator-url", "the Ingress orchestrator's base URL (seed 003's /internal/invoke, ...); empty: the token's MCP agent runs Ingress clients' runs")
	fs.IntSetting(&cfg.MaxIdleConns, "max-idle-connections", "HTTP connections reading headers or idle between requests, in all; past it the oldest is closed (default 1024)")
	fs.IntSetting(&cfg.MaxIdlePerAddr, "max-idle-connections-per-address", "of those, from one address (default 256)")
	showVersion = fs.Bool("version", false, "print the version and exit")
	return fs, showVersion
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "service" {
		return runService(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "health" {
		return runHealth(ctx, args[1:], stdout, stderr)
	}
	var cfg fileConfig
	fs, showVersion := newFlags(&cfg, stderr)
	checkChans := fs.Bool("check-channels", false, "send a test message through every channel of the config, say what failed, and exit")
	qr := fs.Bool("qr", false, "print the phone's URL as a QR code even when the output is no terminal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, buildinfo.String("agentassistant-srv"))
		return err
	}
	cfgPath, err := fs.Load(&cfg)
	if err != nil {
		return err
	}
	if *checkChans {
		return checkChannels(&cfg, stdout)
	}
	if err := checkSettings(fs, &cfg); err != nil {
		return err
	}
	log, err := config.Logger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	if n := procs(cfg.Procs); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	log.Debug("running Go code on", "cpus", runtime.GOMAXPROCS(0), "of", runtime.NumCPU())
	warnReadable(cfgPath, &cfg, log)

	loopback := isLoopback(cfg.Host)
	if cfg.Token == "" && !loopback {
		return fmt.Errorf("listening on %s (beyond this machine) needs a configured token: set agentassistant_server_token or -token", cfg.Host)
	}
	// Before the token, the logs or the store touch the directory: one
	// this build cannot read is left as it is.
	if _, err := datadir.Prepare(cfg.DataDir, buildinfo.Version(), log); err != nil {
		return err
	}
	if cfg.Token == "" {
		tok, created, err := auth.LoadOrCreate(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if created {
			log.Info("generated a new token", "file", cfg.DataDir+string(os.PathSeparator)+auth.TokenFile)
		}
		cfg.Token = tok
	}
	tokens, err := auth.NewTokens(append([]string{cfg.Token}, cfg.Tokens...)...)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	guard := &auth.Guard{Hosts: cfg.AllowedHosts, Origins: cfg.AllowedOrigins}
	switch {
	case isWildcard(cfg.Host): // a phone opens it at one of them
		for _, a := range ownAddrs() {
			guard.Hosts = append(guard.Hosts, a.String())
		}
	case !loopback:
		guard.Hosts = append(guard.Hosts, cfg.Host)
	}

	if addr := os.Getenv("AGENTASSISTANT_PPROF"); addr != "" {
		stop, err := servePprof(addr, guard, log)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logs, err := studylog.Open(cfg.DataDir, studylog.Options{Sync: cfg.StudyLogSync,
		MaxFilesPerOwner: cfg.StudyLogMaxFiles, MaxBytesPerOwner: cfg.StudyLogMaxBytes})
	if err != nil {
		return err
	}
	cat, err := catalog.Load(cfg.Catalog)
	if err != nil {
		return err
	}
	allTokens := append([]string{cfg.Token}, cfg.Tokens...)
	hubOpts := hub.Options{OrphanGrace: secs(cfg.OrphanGrace),
		HistoryRetention: time.Duration(cfg.HistoryDays) * 24 * time.Hour,
		MissedRetention:  time.Duration(cfg.MissedHours) * time.Hour}
	var cl *cluster.Cluster
	var rl *cluster.RelayLink
	var relayCluster relay.Cluster // nil in one process
	if cfg.NATSURL != "" {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err = cluster.Open(cctx, cluster.Options{URL: cfg.NATSURL, Tokens: allTokens, Instance: cfg.Instance,
			Replicas: cfg.NATSReplicas, History: hubOpts.HistoryRetention, HistoryScan: cfg.HistoryScan, Logger: log.With("component", "cluster")})
		if err == nil {
			defer func() { _ = cl.Close() }()
			rl, err = cl.Relay(cctx)
		}
		cancel()
		if err != nil {
			return err
		}
		defer func() { _ = rl.Close() }()
		relayCluster = rl
		hubOpts.Shared, hubOpts.Instance = cl, cl.Instance()
		log.Info("cluster mode", "instance", cl.Instance())
	} else {
		db, err := store.Open(cfg.DataDir, store.Options{Sync: cfg.DBSync, Logger: log,
			OnError: func(err error) { log.Error("store", "err", err) }})
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		hubOpts.Store = db
	}
	io := ingress.Options{ReplayWindow: secs(cfg.IngressReplay), ApprovalTimeout: secs(cfg.IngressApproval),
		ReplayBytes: cfg.IngressReplayBytes, ReplayTotalBytes: cfg.IngressReplayTotal, AgentWait: secs(cfg.IngressAgentWait),
		Conn: wsconn.Options{PingInterval: secs(cfg.PingInterval), PongWait: secs(cfg.PongWait), WriteWait: secs(cfg.WriteWait)}}
	if cfg.OrchestratorURL != "" {
		orch, err := ingress.NewHTTPOrchestrator(ingress.HTTPOptions{URL: cfg.OrchestratorURL, Token: cfg.OrchestratorToken,
			Timeout: secs(cfg.OrchestratorTimeout), Logger: log.With("component", "orchestrator")})
		if err != nil {
			return err
		}
		defer orch.CloseIdle()
		io.Orchestrator = orch
	}
	// Web Push: its keys and the devices' subscriptions live in the data
	// directory, or in a cluster in JetStream, where the capabilities
	// of its notifications are checked too (any instance may take one).
	var pushOpts *push.Options
	var caps *answercap.Store
	if cl == nil {
		keys, err := push.LoadOrCreateKeys(cfg.DataDir)
		if err != nil {
			return err
		}
		subs, err := push.OpenFileSubscriptions(cfg.DataDir)
		if err != nil {
			return err
		}
		pushOpts = &push.Options{Keys: keys, Subscriptions: subs}
	} else {
		sp, err := cl.OpenPush(ctx)
		if err != nil {
			return err
		}
		defer sp.Close()
		if caps, err = answercap.NewShared(sp.CapKey, sp, sp.Token); err != nil {
			return err
		}
		pushOpts = &push.Options{Keys: sp.Keys, Subscriptions: sp.Subscriptions()}
	}
	chans, err := channelOptions(&cfg, log.With("component", "channels"))
	if err != nil {
		return err
	}
	server := srv.New(srv.Options{Ingress: io, Push: pushOpts, Caps: caps, Channels: chans, Tokens: tokens, Guard: guard, Logger: log, StudyLogs: logs, Catalog: cat, Cluster: cl,
		Pending:          auth.NewPending(cfg.MaxUnauthConns, cfg.MaxUnauthPerAddr),
		Idle:             srv.NewIdleConns(cfg.MaxIdleConns, cfg.MaxIdlePerAddr),
		MaxUnauthMessage: cfg.MaxUnauthMessage, BodyTimeout: secs(cfg.BodyTimeout),
		AGUI: agui.Options{MaxBody: cfg.AGUIMaxBody, FrontendGrace: secs(cfg.AGUIFrontendGrace), MaxThreadsPerToken: cfg.AGUIMaxThreads,
			AgentWait: secs(cfg.AGUIAgentWait), AgentIdle: secs(cfg.AGUIAgentIdle)},
		Inbox: inbox.Options{MaxPerToken: cfg.MaxPerToken, PingInterval: secs(cfg.PingInterval), PongWait: secs(cfg.PongWait),
			WriteWait: secs(cfg.WriteWait), LoginTimeout: secs(cfg.LoginTimeout)},
		Relay: relay.Options{Cluster: relayCluster, HostGrace: secs(cfg.HostGrace),
			MaxSessionsPerToken: cfg.RelayMaxSessions, MaxConnsPerToken: cfg.RelayMaxConns, MaxStatePerToken: cfg.RelayStateBytes,
			CallTimeout: secs(cfg.RelayCallTimeout), Conn: wsconn.Options{PingInterval: secs(cfg.PingInterval), PongWait: secs(cfg.PongWait),
				WriteWait: secs(cfg.WriteWait)}},
		Hub: hubOpts,
		MCP: mcphttp.Options{MaxSessions: cfg.MaxMCPSessions,
			Bridge: mcpbridge.Options{Version: buildinfo.Version(), HostGrace: secs(cfg.HostGrace)}}})
	if _, _, err := server.Hub().Restore(allTokens); err != nil {
		return fmt.Errorf("restore requests: %w", err)
	}
	if cl == nil {
		if err := loadKept(cfg.DataDir, server.Hub(), allTokens); err != nil {
			log.Warn("upstream web pages may show a request twice", "err", err) // a convenience, not the requests
		}
	}
	if cl != nil {
		if err := cl.Start(server.Hub(), server.Connections); err != nil {
			return err
		}
		// From here the cluster applies changes to the hub, which may
		// write on hearing them: the server is closed (the hub waiting for
		// those writes) before the deferred Cluster.Close closes NATS.
		if err := rl.Start(server.Relay()); err != nil {
			_ = server.Close()
			return err
		}
		select { // the cluster's pending requests are here before anyone asks
		case <-cl.Ready():
		case <-ctx.Done():
			_ = server.Close()
			return nil
		}
	}
	hs := srv.NewHTTPServer(server.Handler(), srv.HTTPOptions{ErrorLog: log, Idle: server.Idle()})
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}

	addr := ln.Addr().(*net.TCPAddr)
	urlHost := cfg.Host
	if urlHost == "" || urlHost == "0.0.0.0" || urlHost == "::" {
		urlHost = "127.0.0.1"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(urlHost, strconv.Itoa(addr.Port)), Path: "/",
		RawQuery: url.Values{"token": {cfg.Token}}.Encode()}
	log.Info("listening", "addr", addr.String())
	_, _ = fmt.Fprintf(stdout, "agentassistant-srv is running. Open this URL to answer your agents:\n\n  %s\n\n", u.String())
	printPhone(stdout, u, cfg.Host, *qr)

	errc := make(chan error, 1)
	go func() {
		if cfg.TLSCert != "" {
			errc <- hs.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
			return
		}
		errc <- hs.Serve(ln)
	}()
	var lost <-chan struct{} // NATS lost the cluster's storage: start afresh
	if cl != nil {
		lost = cl.Lost()
	}
	afresh := false
	select {
	case err := <-errc:
		_ = server.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	case <-lost:
		afresh = true
	}
	log.Info("shutting down", "to_start_afresh", afresh)
	_ = server.Close() // first, so waiting agent calls return and the HTTP server can drain
	if cl == nil {
		if err := saveKept(cfg.DataDir, server.Hub()); err != nil {
			log.Warn("upstream web pages may show a request twice after the restart", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	if err != nil {
		_ = hs.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if afresh {
		return errStartAfresh
	}
	return nil
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
