// Command agentassistant-input types text into the window that has the
// keyboard focus on this computer.
//
// As a command, -input TEXT (or -input64 BASE64, UTF-8) types the text once,
// newlines as Enter. As a companion, -listen logs in to agentassistant-srv
// as a device of the token ("⌨ PC input (hostname)") and types every chat
// message sent to it from the inbox, so a person can dictate on the phone
// and have the text arrive on the PC. Logs go to stderr.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/agentassistant/agentassistant/internal/buildinfo"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/internal/failover"
	"github.com/agentassistant/agentassistant/internal/remoteinput"
	"github.com/agentassistant/agentassistant/internal/typing"
	"github.com/agentassistant/agentassistant/srv/auth"
)

func main() {
	config.Main("agentassistant-input", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// fileConfig is what the companion takes from agentassistant-mcp.toml: it
// talks to the same server as the MCP binary, so it reads the same file,
// and leaves the keys it does not know to their owner.
type fileConfig struct {
	Host  string `toml:"agentassistant_server_host"`
	Port  int    `toml:"agentassistant_server_port"`
	Token string `toml:"agentassistant_server_token"`
	// Servers, when set, are the instances of a cluster (host:port, or
	// https://host:port for a server that serves HTTPS), tried in turn:
	// in place of host and port, as agentassistant-mcp reads them.
	Servers  []string `toml:"agentassistant_servers"`
	LogLevel string   `toml:"log_level"`
}

const configName = "agentassistant-mcp.toml"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := fileConfig{Host: "127.0.0.1", Port: 22080, LogLevel: "info"}
	fs := config.NewFlags("agentassistant-input", configName, true, stderr)
	input := fs.String("input", "", "type this text into the focused window (newlines as Enter) and exit")
	input64 := fs.String("input64", "", "like -input, the text base64-encoded UTF-8")
	listen := fs.Bool("listen", false, "join agentassistant-srv as a device and type every chat message sent to it")
	fs.StringSetting(&cfg.Host, "host", "agentassistant-srv host")
	fs.IntSetting(&cfg.Port, "port", "agentassistant-srv port")
	fs.StringSetting(&cfg.Token, "token", "token (default: the one agentassistant-srv generated on this machine)")
	servers := fs.String("server", "", "agentassistant-srv instances of a cluster, comma-separated host:port (or https://host:port for HTTPS), tried in turn (in place of -host and -port)")
	nickname := fs.String("nickname", "", `name in the inbox's online list (default "PC input (HOSTNAME)"); "`+remoteinput.NicknameMark+`" is put in front`)
	backend := fs.String("backend", "auto", "how to type: "+strings.Join(typing.Backends(), ", "))
	maxChars := fs.Int("max-chars", remoteinput.DefaultMaxChars, "longest chat message typed, in characters")
	fs.StringSetting(&cfg.LogLevel, "log-level", "debug, info, warn or error (logs go to stderr)")
	if done, err := fs.ParseVersion(args, stdout, buildinfo.String("agentassistant-input")); done || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (the text goes after -input)", fs.Arg(0))
	}
	modes := 0
	for _, m := range []string{"input", "input64", "listen"} {
		if fs.Given(m) {
			modes++
		}
	}
	if modes != 1 {
		fs.Usage()
		return errors.New("give exactly one of -input, -input64 or -listen")
	}

	var urls []string
	if *listen {
		// The settings are checked before anything else can fail.
		if _, err := fs.Load(&cfg); err != nil {
			return err
		}
		check := fs.Check()
		check.ServerAddress(cfg.Host, cfg.Port)
		check.Level("log_level", "log-level", cfg.LogLevel)
		if err := check.Err(); err != nil {
			return err
		}
		if *servers == "" && len(cfg.Servers) > 0 {
			*servers = strings.Join(cfg.Servers, ",")
		}
		addrs, scheme := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}, "http"
		if *servers != "" {
			var err error
			if addrs, scheme, err = failover.Parse(*servers, cfg.Port); err != nil {
				return err
			}
		}
		for _, a := range addrs {
			u := url.URL{Scheme: map[string]string{"http": "ws", "https": "wss"}[scheme], Host: a, Path: "/ws"}
			urls = append(urls, u.String())
		}
	}
	kb, err := typing.New(typing.Options{Backend: *backend})
	if err != nil {
		return fmt.Errorf("cannot type here: %w", err)
	}
	if c, ok := kb.(io.Closer); ok {
		defer func() { _ = c.Close() }()
	}

	if !*listen {
		text := *input
		if fs.Given("input64") {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*input64))
			if err != nil {
				return fmt.Errorf("decode -input64: %w", err)
			}
			text = string(b)
		}
		if err := typing.Write(ctx, kb, text, nil); err != nil {
			return fmt.Errorf("type: %w", err)
		}
		return nil
	}

	logger, err := config.Logger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	if cfg.Token == "" {
		// Same machine, default data directory: use the server's own token.
		tok, err := auth.Load(config.AppDir())
		if err != nil {
			return errors.New("no token: give -token (or agentassistant_server_token in " + configName + "); on the server's own machine it is read from the data directory")
		}
		cfg.Token = tok
	}
	name := *nickname
	if name == "" {
		h, _ := os.Hostname()
		name = "PC input (" + h + ")"
	}
	logger.Info("connecting", "server", strings.Join(urls, ", "), "keyboard", kb.Name())
	c := remoteinput.New(remoteinput.Options{
		URLs:     urls,
		Token:    cfg.Token,
		Nickname: name,
		Keyboard: kb,
		Logger:   logger,
		MaxChars: *maxChars,
	})
	return c.Run(ctx)
}
