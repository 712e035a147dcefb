// Command agentassistant-srv delivers agents' questions and task reports to
// every browser logged in under the same token, and their answers back.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/buildinfo"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/catalog"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/datadir"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/mcphttp"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/store"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

func main() {
	if runAsService() {
		return
	}
	config.Main("agentassistant-srv", func(ctx context.Context) error {
		err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		if errors.Is(err, errStartAfresh) {
			err = startAfresh() // returns only if it cannot
		}
		return err
	})
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "service" {
		return runService(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "health" {
		return runHealth(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return unknownCommand(args[0])
	}
	var cfg fileConfig
	fs := newFlags(&cfg, stderr)
	checkChans := fs.Bool("check-channels", false, "send a test message through every channel of the config, say what failed, and exit")
	qr := fs.Bool("qr", false, "print the phone's URL as a QR code even when the output is no terminal")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: agentassistant-srv [flags]                     run the server\n%s"+
			"       agentassistant-srv health [-port N] [-host H]  ask a running server's /health (exit 1 unless it answers 200);\n"+
			"                                                      -port and -host as the server was started, or -url URL\n\n"+
			"Every flag but -config, -check-channels, -qr and -version is also a setting of agentassistant-srv.toml.\nflags:\n",
			strings.Replace(serviceUsage, "usage: ", "       ", 1)+"\n")
		fs.PrintDefaults()
	}
	if done, err := fs.ParseVersion(args, stdout, buildinfo.String("agentassistant-srv")); done || err != nil {
		return err
	}
	cfgPath, err := fs.Load(&cfg)
	if err != nil {
		return err
	}
	if *checkChans {
		return checkChannels(&cfg, cfgPath, stdout)
	}
	if err := checkSettings(fs, &cfg); err != nil {
		return err
	}
	log, err := config.Logger(cfg.Server.LogLevel, stderr)
	if err != nil {
		return err
	}
	fs.LogMoved(log.With("file", cfgPath))
	if n := procs(cfg.Server.Procs); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	log.Debug("running Go code on", "cpus", runtime.GOMAXPROCS(0), "of", runtime.NumCPU())
	warnReadable(cfgPath, &cfg, log)

	loopback := isLoopback(cfg.Host)
	if cfg.Token == "" && !loopback {
		return fmt.Errorf("listening on %s (beyond this machine) needs a configured token: set agentassistant_server_token or -token%s",
			cfg.Host, keepGenerated(cfg.Server.DataDir))
	}
	// Before the token, the logs or the store touch the directory: one
	// this build cannot read is left as it is.
	dataDir := cfg.Server.DataDir
	if _, err := datadir.Prepare(dataDir, buildinfo.Version(), log); err != nil {
		return err
	}
	if cfg.Token == "" {
		tok, created, err := auth.LoadOrCreate(dataDir)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if created {
			log.Info("generated a new token", "file", dataDir+string(os.PathSeparator)+auth.TokenFile)
		}
		cfg.Token = tok
	}
	allTokens := append([]string{cfg.Token}, cfg.Server.Tokens...)
	tokens, err := auth.NewTokens(allTokens...)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	guard := &auth.Guard{Hosts: cfg.Server.AllowedHosts, Origins: cfg.Server.AllowedOrigins}
	switch {
	case isWildcard(cfg.Host): // a phone opens it at one of them
		for _, a := range ownAddrs() {
			guard.Hosts = append(guard.Hosts, a.String())
		}
	case !loopback:
		guard.Hosts = append(guard.Hosts, cfg.Host)
	}
	trustPublicURL(guard, cfg.Channels.PublicURL)

	if addr := os.Getenv("AGENTASSISTANT_PPROF"); addr != "" {
		stop, err := servePprof(addr, guard, log)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		defer stop()
	}
	listenAddr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return listenError(err, listenAddr, cfg.Host)
	}
	tu := tune(&cfg)
	logs, err := studylog.Open(dataDir, tu.StudyLog)
	if err != nil {
		return err
	}
	cat, err := catalog.Load(cfg.Relay.BookingCatalog)
	if err != nil {
		return err
	}
	so := tu.Server
	var cl *cluster.Cluster
	var rl *cluster.RelayLink
	var relayCluster relay.Cluster // nil in one process
	if cfg.Cluster.NATSURL != "" {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		co := tu.Cluster
		co.Tokens, co.Logger = allTokens, log.With("component", "cluster")
		cl, err = cluster.Open(cctx, co)
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
		// Times the instances share (deadlines, notes' ends, claims'
		// ages) are on NATS's clock, whatever this machine's says.
		so.Hub.Shared, so.Hub.Instance, so.Hub.Now = cl, cl.Instance(), cl.Now
		log.Info("cluster mode", "instance", cl.Instance())
	} else {
		sto := tu.Store
		sto.Logger = log // which tells a failing write once, and when it passes again
		db, err := store.Open(dataDir, sto)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		so.Hub.Store = db
	}
	if cfg.Ingress.OrchestratorURL != "" {
		oo := tu.Orchestrator
		oo.Logger = log.With("component", "orchestrator")
		orch, err := ingress.NewHTTPOrchestrator(oo)
		if err != nil {
			return err
		}
		defer orch.CloseIdle()
		so.Ingress.Orchestrator = orch
	}
	// Web Push: its keys and the devices' subscriptions live in the data
	// directory, or in a cluster in JetStream, where the capabilities
	// of its notifications are checked too (any instance may take one).
	var pushOpts *push.Options
	var caps *answercap.Store
	var chanShare *cluster.Channels // cluster mode: the channels' notes and leases
	if cl == nil {
		keys, err := push.LoadOrCreateKeys(dataDir)
		if err != nil {
			return err
		}
		subs, err := push.OpenFileSubscriptions(dataDir)
		if err != nil {
			return err
		}
		pushOpts = &tu.Push
		pushOpts.Keys, pushOpts.Subscriptions = keys, subs
		// The buttons of what was sent before a restart (a kill -9
		// included) still answer after it: capabilities are signed with
		// a key kept here, and which message asks which question is
		// kept here too.
		key, err := answercap.LoadOrCreateKey(dataDir)
		if err != nil {
			return err
		}
		byRoom := make(map[string]string, len(allTokens))
		for _, t := range allTokens {
			byRoom[store.Room(t)] = t
		}
		if caps, err = answercap.NewShared(key, answercap.NewMemoryClaims(nil), func(room string) (string, bool) {
			t, ok := byRoom[room]
			return t, ok
		}); err != nil {
			return err
		}
		// So do the /mcp sessions: their IDs, signed with it, are served
		// again after a restart rather than refused (404) until the
		// person reconnects the MCP client by hand.
		so.MCP.SessionKey = key
		// And the sessions their clients ended stay ended.
		ended, err := mcphttp.OpenFileEnded(dataDir, so.MCP.MaxSessions, nil, log)
		if err != nil {
			return err
		}
		defer func() { _ = ended.Close() }()
		so.MCP.Ended = ended
	} else {
		sp, err := cl.OpenPush(ctx)
		if err != nil {
			return err
		}
		defer sp.Close()
		if caps, err = answercap.NewShared(sp.CapKey, sp, sp.Token); err != nil {
			return err
		}
		// The same key lets every instance serve the /mcp sessions any of
		// them made (mcphttp derives its own key from it).
		so.MCP.SessionKey = sp.CapKey
		pushOpts = &tu.Push
		pushOpts.Keys, pushOpts.Subscriptions, pushOpts.Closes, pushOpts.Now = sp.Keys, sp.Subscriptions(), sp, cl.Now
		// A reply to a Telegram, Slack or e-mail question may reach any
		// instance: which message asks what is shared, and one instance
		// at a time takes each service's replies.
		if chanShare, err = cl.OpenChannels(ctx, 0); err != nil {
			return err
		}
	}
	chans, err := channelOptions(&cfg, log.With("component", "channels"))
	if err != nil {
		return err
	}
	if chans != nil && chanShare != nil {
		chans.Notes, chans.Leader, chans.Now = chanShare, chanShare, cl.Now
	}
	if chans != nil && chanShare == nil {
		notes, err := channel.OpenFileNotes(dataDir, nil, log)
		if err != nil {
			return err
		}
		defer func() { _ = notes.Close() }()
		// No answer is taken before the requests are restored (Restored).
		chans.Notes, chans.AfterRestore = notes, true
	}
	so.Push, so.Caps, so.Channels, so.Tokens, so.Guard, so.Logger, so.StudyLogs, so.Catalog, so.Cluster = pushOpts, caps, chans, tokens, guard, log, logs, cat, cl
	so.Pending = auth.NewPending(tu.Pending[0], tu.Pending[1])
	so.Idle = srv.NewIdleConns(tu.Idle[0], tu.Idle[1])
	so.Relay.Cluster = relayCluster
	server := srv.New(so)
	if _, _, err := server.Hub().Restore(allTokens); err != nil {
		return fmt.Errorf("restore requests: %w", err)
	}
	if cl == nil {
		server.Restored(allTokens)
		if err := loadKept(dataDir, server.Inbox(), allTokens); err != nil {
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
	if cfg.Server.TLSCert != "" {
		scheme = "https"
	}

	addr := ln.Addr().(*net.TCPAddr)
	urlHost := cfg.Host
	if isWildcard(urlHost) {
		urlHost = "127.0.0.1"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(urlHost, strconv.Itoa(addr.Port)), Path: "/",
		RawQuery: url.Values{"token": {cfg.Token}}.Encode()}
	log.Info("listening", "addr", addr.String())
	_, _ = fmt.Fprintf(stdout, "agentassistant-srv is running. Open this URL to answer your agents:\n\n  %s\n\n", u.String())
	printPhone(stdout, u, cfg.Host, *qr)

	errc := make(chan error, 1)
	go func() {
		if cfg.Server.TLSCert != "" {
			errc <- hs.ServeTLS(ln, cfg.Server.TLSCert, cfg.Server.TLSKey)
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
		server.StorageLost()
	}
	log.Info("shutting down", "to_start_afresh", afresh)
	_ = server.Close() // first, so waiting agent calls return and the HTTP server can drain
	if cl == nil {
		if err := saveKept(dataDir, server.Inbox()); err != nil {
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
	if afresh {
		// A request that would not drain (a slow client's body) is cut
		// off; the fresh start must not wait on it.
		if err != nil {
			log.Warn("requests cut off to start afresh", "err", err)
		}
		return errStartAfresh
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unknownCommand refuses a word where a command goes, naming the
// commands there are: without it, "servce install" read as a stray
// argument after the flags.
func unknownCommand(w string) error {
	const cmds = "agentassistant-srv [flags], agentassistant-srv service install|uninstall|status, agentassistant-srv health"
	switch {
	case slices.Contains([]string{"install", "uninstall", "status"}, w):
		return fmt.Errorf("unknown command %q: did you mean agentassistant-srv service %s? The commands: %s", w, w, cmds)
	case isFlag(w): // "version", as other tools take it
		return fmt.Errorf("unknown command %q: did you mean -%s? The commands: %s", w, w, cmds)
	case config.Closest(w, "service", "health") != "":
		return fmt.Errorf("unknown command %q: did you mean %q? The commands: %s", w, config.Closest(w, "service", "health"), cmds)
	}
	return fmt.Errorf("unknown command %q: every setting is a flag (-name value); the commands: %s", w, cmds)
}

// isFlag tells whether w is the name of one of the server's flags.
func isFlag(w string) bool {
	var cfg fileConfig
	fs := newFlags(&cfg, io.Discard)
	return fs.Lookup(w) != nil
}

// keepGenerated tells how to go on with the token the server generated
// on an earlier start, kept in dataDir, so the URL the person already
// opened stays valid; with none, how to make one. It names the file,
// never the token; quoted, as macOS's data directory has a space in it.
func keepGenerated(dataDir string) string {
	f := filepath.Join(dataDir, auth.TokenFile)
	if _, err := os.Stat(f); err != nil {
		// None generated yet: a random one, no weaker than a generated one.
		if runtime.GOOS == "windows" {
			return `; a new one: -token ([guid]::NewGuid().ToString('N') + [guid]::NewGuid().ToString('N')), and the URL it prints has it`
		}
		return `; a new one: -token "$(openssl rand -hex 24)", and the URL it prints has it`
	}
	if runtime.GOOS == "windows" {
		return fmt.Sprintf(`; to keep the one it generated (and the URL you have): -token (Get-Content "%s")`, f)
	}
	return fmt.Sprintf(`; to keep the one it generated (and the URL you have): -token "$(cat '%s')"`, f)
}
