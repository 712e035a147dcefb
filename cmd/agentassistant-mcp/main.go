// Command agentassistant-mcp is an MCP stdio server that lets an AI agent
// ask its person questions and report finished tasks through
// agentassistant-srv. stdout carries only MCP; logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/buildinfo"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/internal/failover"
	"github.com/agentassistant/agentassistant/internal/protocount"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv/auth"
)

func main() {
	config.Main("agentassistant-mcp", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr) })
}

// fileConfig is agentassistant-mcp.toml.
type fileConfig struct {
	Host  string `toml:"agentassistant_server_host"`
	Port  int    `toml:"agentassistant_server_port"`
	Token string `toml:"agentassistant_server_token"`
	// Servers, when set, are the instances of a cluster (host:port), tried
	// in turn: in place of host and port.
	Servers  []string `toml:"agentassistant_servers"`
	Session  string   `toml:"relay_session"`
	LogLevel string   `toml:"log_level"`
	// HostGraceSeconds: how long the web UI's tools stay listed after its
	// host left (0: the default, 120).
	HostGraceSeconds int `toml:"host_grace_seconds"`
}

const configName = "agentassistant-mcp.toml"

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg := fileConfig{Host: "127.0.0.1", Port: 22080, LogLevel: "info"}
	fs := config.NewFlags("agentassistant-mcp", configName, false, stderr)
	fs.StringSetting(&cfg.Host, "host", "agentassistant-srv host")
	fs.IntSetting(&cfg.Port, "port", "agentassistant-srv port")
	fs.StringSetting(&cfg.Token, "token", "token (default: the one agentassistant-srv generated on this machine)")
	servers := fs.String("server", "", "agentassistant-srv instances of a cluster, comma-separated host:port (or https://host:port for HTTPS), tried in turn (in place of -host and -port)")
	web := fs.Bool("web", false, "open the server's web UI in the browser")
	fs.StringSetting(&cfg.Session, "session", "relay session of the web UI to drive (default \"default\")")
	fs.StringSetting(&cfg.LogLevel, "log-level", "debug, info, warn or error (logs go to stderr)")
	if done, err := fs.ParseVersion(args, stdout, buildinfo.String("agentassistant-mcp")); done || err != nil {
		return err
	}
	path, err := fs.Load(&cfg)
	if err != nil {
		return err
	}
	check := fs.Check()
	check.ServerAddress(cfg.Host, cfg.Port)
	check.Level("log_level", "log-level", cfg.LogLevel)
	check.Int("host_grace_seconds", "", int64(cfg.HostGraceSeconds), 0, int64(math.MaxInt64/time.Second), "it must be 0 (the default, 120) or more")
	if err := check.Err(); err != nil {
		return err
	}
	tokenFrom := "" // where the token came from, for messages that must not show it
	switch {
	case fs.Given("token"):
		tokenFrom = "the -token flag"
	case cfg.Token != "":
		tokenFrom = "agentassistant_server_token in " + path
	}
	logger, err := config.Logger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}

	if cfg.Token == "" {
		// Same machine, default data directory: use the server's own token.
		file := filepath.Join(config.AppDir(), auth.TokenFile)
		if tok, err := auth.Load(config.AppDir()); err == nil {
			cfg.Token = tok
			tokenFrom = "the URL agentassistant-srv printed (its token file " + file + ")"
		} else {
			logger.Warn("no token configured and none found from a local agentassistant-srv; calls will be rejected", "file", file,
				"hint", "set agentassistant_server_token or -token to the token of the URL agentassistant-srv printed (…/?token=…); a server started with -data DIR keeps it in DIR/token")
		}
	}

	base := url.URL{Scheme: "http", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	var transport http.RoundTripper = &http.Transport{
		Proxy:               nil, // the server is local or on a LAN; never send the token through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	var probe func(context.Context) (func(), error)
	if *servers == "" && len(cfg.Servers) > 0 {
		*servers = strings.Join(cfg.Servers, ",")
	}
	if *servers != "" {
		// A cluster: a call that fails moves the next one (the re-attach)
		// to the next instance.
		addrs, scheme, err := failover.Parse(*servers, cfg.Port)
		if err != nil {
			return err
		}
		base.Scheme, base.Host = scheme, addrs[0]
		ft := failover.New(scheme, addrs, transport)
		transport = ft
		// A waiting question's instance is checked (mcpbridge's stall.go):
		// a frozen one is left for the next.
		probe = func(ctx context.Context) (func(), error) {
			return ft.Probe(ctx, 2*time.Second, http.Header{auth.TokenHeader: {cfg.Token}})
		}
	}
	// Questions wait for a person as long as their timeout says; UI calls
	// answer within the server's own limits, so a hung one is cut at 60s.
	httpClient := &http.Client{Transport: transport}
	uiHTTP := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	dir, _ := os.Getwd()
	// The session ends with stdin (the client closed it) or with ctx (a
	// signal). Calls it cuts short leave their questions pending for the
	// next agentassistant-mcp of the project rather than withdrawing them.
	sess, endSession := context.WithCancel(ctx)
	defer endSession()
	byHand := config.Terminal(stdin)
	stdin = &endReader{r: &lineBound{r: stdin, max: maxLine, too: func() {
		logger.Warn("dropped a message from the MCP client longer than the bound; it was answered with a parse error", "bound_bytes", maxLine)
	}}, end: endSession}
	// The token goes in a header on every call, also where the message
	// carries it: the server reads a message whose token is only inside
	// it up to a small bound, and a question may be long.
	withToken := connect.WithClientOptions(connect.WithInterceptors(tokenHeader(cfg.Token)),
		// A reply is read up to maxReply once inflated: a server, or
		// what stands between, could send a gzip body of kilobytes that
		// inflates to gigabytes.
		connect.WithReadMaxBytes(maxReply),
		// And its elements counted before it is decoded: an empty item is
		// two bytes on the wire and a struct of some eighty decoded.
		connect.WithCodec(protocount.Proto{}))
	s := mcpbridge.New(mcpbridge.Options{
		Client:           agentassistprotoconnect.NewSrvAgentAssistClient(httpClient, base.String(), withToken),
		Control:          agentassistprotoconnect.NewSrvAgentAssistControlClient(uiHTTP, base.String(), withToken),
		Reply:            agentassistprotoconnect.NewSrvAgentAssistReplyClient(uiHTTP, base.String(), withToken),
		UI:               agentassistprotoconnect.NewSrvUIRelayClient(uiHTTP, base.String(), withToken),
		RelaySession:     cfg.Session,
		Token:            cfg.Token,
		ServerURL:        base.String(),
		Logger:           logger,
		Version:          buildinfo.Version(),
		ProjectDirectory: dir,
		Done:             sess.Done(),
		HostGrace:        time.Duration(cfg.HostGraceSeconds) * time.Second,
		Probe:            probe,
	})

	if *web {
		// The opener is ours: run waits for it, and stops it if stdio ends first.
		var openers sync.WaitGroup
		defer openers.Wait()
		openCtx, stopOpener := context.WithCancel(ctx)
		defer stopOpener()
		openWeb(openCtx, &openers, base, cfg.Token, tokenFrom, logger)
	}

	// The first mistakes of a set-up (the server not started, another
	// port, another token) would show only when the agent first asks: say
	// them in the MCP client's log at once. run waits for the check.
	var checks sync.WaitGroup
	defer checks.Wait()
	checkCtx, stopCheck := context.WithCancel(sess)
	defer stopCheck()
	checks.Go(func() { checkServer(checkCtx, uiHTTP, base, cfg.Token, tokenFrom, logger) })

	logger.Info("serving MCP on stdio", "server", base.String())
	if byHand {
		// Someone trying it by hand, not an MCP client: say what it is.
		logger.Warn("agentassistant-mcp is for an MCP client to start: it speaks MCP on stdin and stdout; register it in your client (README, Register the MCP server), or end it here with Ctrl-D")
	}
	watch, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(watch) }) // the web UI's tools follow its host
	// mcp-go serves tools/call on a pool of five workers by default: a
	// sixth question asked while five wait for the person would not reach
	// the server until one of them is answered. The library's largest pool
	// and queue: a hundred questions shown at once, far more than a person
	// answers, and the read of stdin (pings, cancels) not held up by calls
	// waiting their turn until ten thousand more are queued.
	errLog := log.New(stderr, "mcp: ", log.LstdFlags)
	stdio := server.NewStdioServer(s.MCPServer)
	for _, o := range []server.StdioOption{
		server.WithErrorLogger(errLog),
		server.WithWorkerPoolSize(stdioCalls),
		server.WithQueueSize(stdioQueue),
	} {
		o(stdio)
	}
	err = stdio.Listen(sess, stdin, stdout)
	stopWatch()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serve stdio: %w", err)
	}
	return nil
}

// maxReply bounds a reply of the server, inflated: an answer comes in a
// frame of 16 MiB at most (a channel's, with its images, in less), which a
// reply carries with room to spare.
const maxReply = 32 << 20

// stdioCalls is how many tool calls agentassistant-mcp serves at once,
// stdioQueue how many more wait for one of them to end: mcp-go's largest.
const (
	stdioCalls = 100
	stdioQueue = 10000
)

// endReader calls end when its reader fails or ends, before it says so.
type endReader struct {
	r   io.Reader
	end func()
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.end()
	}
	return n, err
}

// tokenHeader sends the token as a header: how the services whose
// messages carry no UserToken authenticate, and how a message longer
// than the server reads without it gets through.
func tokenHeader(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(auth.TokenHeader, token)
			return next(ctx, req)
		}
	}
}

// checkServer asks the server's /health with the token once, and warns
// when the server cannot be reached or refuses the token, saying what to
// do; questions would fail the same way later.
func checkServer(ctx context.Context, c *http.Client, base url.URL, token, tokenFrom string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := base
	u.Path = "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return
	}
	if token != "" {
		req.Header.Set(auth.TokenHeader, token)
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return // stdio ended first
		}
		logger.Warn("agentassistant-srv is not reachable: questions fail until it runs", "server", base.String(), "err", err,
			"hint", "start agentassistant-srv there, or point at where it runs: -host and -port (or -server), agentassistant_server_host and agentassistant_server_port")
		return
	}
	defer func() { _ = resp.Body.Close() }()
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if token == "" {
			return // said at start: no token
		}
		logger.Warn("agentassistant-srv rejected the token: questions fail until it matches", "server", base.String(), "token", tokenFrom,
			"hint", "set agentassistant_server_token or -token to the token of the URL agentassistant-srv printed")
	case http.StatusForbidden:
		logger.Warn("agentassistant-srv does not answer to this address", "server", base.String(),
			"hint", "add the host name to the server's [server] allowed_hosts, or use its IP address")
	case http.StatusBadRequest:
		// A TLS server's answer to plain HTTP (Go's: "Client sent an
		// HTTP request to an HTTPS server."; nginx's alike).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if base.Scheme == "http" && strings.Contains(string(b), "HTTPS") {
			logger.Warn("agentassistant-srv serves HTTPS there (its -tls-cert): questions fail until agentassistant-mcp reaches it so", "server", base.String(),
				"hint", "give -server https://"+base.Host+" (or agentassistant_servers = [\"https://"+base.Host+"\"]), with a name its certificate holds")
		}
	case http.StatusServiceUnavailable:
		// It runs, but can save nothing just now; its reason comes with
		// the token.
		var h struct{ Reason string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&h)
		logger.Warn("agentassistant-srv cannot save questions just now: they fail until it can", "server", base.String(),
			"reason", wire.OneLine(h.Reason), "hint", "see agentassistant-srv's log, and its /health")
	}
}
