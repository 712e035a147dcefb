package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// channelsConfig is the [channels] table: where questions go besides the
// inbox. Each channel serves the tokens it names (default: the server's
// token). All off by default.
type channelsConfig struct {
	// PublicURL is this server's address as the person's phone reaches
	// it, for the channels' buttons and links (they need it to answer).
	PublicURL string          `toml:"public_url"`
	Ntfy      *ntfyConfig     `toml:"ntfy"`
	Webhook   *webhookConfig  `toml:"webhook"`
	Telegram  *telegramConfig `toml:"telegram"`
	Slack     *slackConfig    `toml:"slack"`
	Email     *emailConfig    `toml:"email"`
}

type slackConfig struct {
	BotToken string   `toml:"bot_token"`
	AppToken string   `toml:"app_token"`
	Channel  string   `toml:"channel"`
	Users    []string `toml:"users"`
	APIURL   string   `toml:"api_url"`
	Tokens   []string `toml:"tokens"`
}

type emailConfig struct {
	SMTPAddr     string   `toml:"smtp_addr"`
	SMTPUser     string   `toml:"smtp_user"`
	SMTPPassword string   `toml:"smtp_password"`
	From         string   `toml:"from"`
	To           []string `toml:"to"`
	IMAPAddr     string   `toml:"imap_addr"`
	IMAPUser     string   `toml:"imap_user"`
	IMAPPassword string   `toml:"imap_password"`
	Mailbox      string   `toml:"mailbox"`
	Senders      []string `toml:"senders"`
	TLS          string   `toml:"tls"`
	Tokens       []string `toml:"tokens"`
}

type telegramConfig struct {
	BotToken string   `toml:"bot_token"`
	Chats    []int64  `toml:"chats"`
	APIURL   string   `toml:"api_url"`
	Tokens   []string `toml:"tokens"`
}

type ntfyConfig struct {
	URL         string   `toml:"url"`
	Topic       string   `toml:"topic"`
	AccessToken string   `toml:"access_token"`
	Tokens      []string `toml:"tokens"`
}

type webhookConfig struct {
	ID     string   `toml:"id"`
	URL    string   `toml:"url"`
	Secret string   `toml:"secret"`
	Tokens []string `toml:"tokens"`
}

// secret reports whether the channels hold a secret (a file others can
// read then gets a warning).
func (c *channelsConfig) secret() bool {
	return c.Ntfy != nil && c.Ntfy.AccessToken != "" || c.Webhook != nil && c.Webhook.Secret != "" ||
		c.Telegram != nil && c.Telegram.BotToken != "" || c.Slack != nil && (c.Slack.BotToken != "" || c.Slack.AppToken != "") ||
		c.Email != nil && (c.Email.SMTPPassword != "" || c.Email.IMAPPassword != "")
}

// check refuses a channel that cannot work. It needs no token, so that
// the server refuses it with its other settings, before it makes a token
// or a database.
func (c *channelsConfig) check() error {
	var errs []error
	if _, err := publicURL(c.PublicURL); err != nil {
		errs = append(errs, fmt.Errorf("channels.public_url = %q: %w", c.PublicURL, err))
	}
	if n := c.Ntfy; n != nil {
		errs = append(errs, serviceURL("ntfy", "url", n.URL))
	}
	if w := c.Webhook; w != nil {
		errs = append(errs, serviceURL("webhook", "url", w.URL))
	}
	if tg := c.Telegram; tg != nil {
		errs = append(errs, serviceURL("telegram", "api_url", tg.APIURL))
	}
	if sl := c.Slack; sl != nil {
		errs = append(errs, serviceURL("slack", "api_url", sl.APIURL))
	}
	if m := c.Email; m != nil {
		errs = append(errs, mailAddr("smtp_addr", m.SMTPAddr), mailAddr("imap_addr", m.IMAPAddr))
	}
	if n := c.Ntfy; n != nil && n.Topic == "" {
		errs = append(errs, fmt.Errorf("channels.ntfy: topic is not set (pick one as secret as a password on a public server)"))
	}
	if w := c.Webhook; w != nil && (w.URL == "" || len(w.Secret) < 16) {
		errs = append(errs, fmt.Errorf("channels.webhook: url and a secret of at least 16 characters are needed"))
	}
	if tg := c.Telegram; tg != nil && (tg.BotToken == "" || len(tg.Chats) == 0) {
		errs = append(errs, fmt.Errorf("channels.telegram: bot_token (from @BotFather) and chats (the chat IDs that may answer) are needed"))
	}
	if sl := c.Slack; sl != nil && (!strings.HasPrefix(sl.BotToken, "xoxb-") || !strings.HasPrefix(sl.AppToken, "xapp-") || sl.Channel == "" || len(sl.Users) == 0) {
		errs = append(errs, fmt.Errorf("channels.slack: bot_token (xoxb-…), app_token (xapp-…, Socket Mode), channel (a channel ID, or a user ID for a DM) and users (the Slack user IDs that may answer) are needed"))
	}
	if m := c.Email; m != nil {
		if m.SMTPAddr == "" || m.From == "" || len(m.To) == 0 {
			errs = append(errs, fmt.Errorf("channels.email: smtp_addr (host:port), from and to are needed"))
		}
		for _, a := range append(append([]string{m.From}, m.To...), m.Senders...) {
			if _, err := mail.ParseAddress(a); a != "" && err != nil {
				errs = append(errs, fmt.Errorf("channels.email: %q is no e-mail address: %w", a, err))
			}
		}
		switch m.TLS {
		case "", "starttls", "tls", "none":
		default:
			errs = append(errs, fmt.Errorf("channels.email: tls = %q: it is \"starttls\", \"tls\" or \"none\"", m.TLS))
		}
	}
	return errors.Join(errs...)
}

// channelOptions builds the channels the config sets, routed to their
// tokens; nil when none is set.
func channelOptions(cfg *fileConfig, log *slog.Logger) (*channel.Options, error) {
	c := cfg.Channels
	if err := c.check(); err != nil {
		return nil, err
	}
	routes := map[string][]channel.Channel{}
	tokensOf := func(named []string) []string {
		if len(named) == 0 {
			return []string{cfg.Token}
		}
		return named
	}
	route := func(ch channel.Channel, named []string) {
		for _, t := range tokensOf(named) {
			routes[t] = append(routes[t], ch)
		}
	}
	client := &http.Client{Timeout: 20 * time.Second}
	if n := c.Ntfy; n != nil {
		route(&channel.Ntfy{URL: n.URL, Topic: n.Topic, AccessToken: n.AccessToken, Client: client}, n.Tokens)
	}
	if w := c.Webhook; w != nil {
		id := cmp.Or(w.ID, "default")
		for _, t := range tokensOf(w.Tokens) {
			// One per token: its signed answers answer that token's questions.
			routes[t] = append(routes[t], &channel.Webhook{ID: id, URL: w.URL, Secret: w.Secret, Token: t, Client: client, Logger: log})
		}
	}
	if tg := c.Telegram; tg != nil {
		route(&channel.Telegram{BotToken: tg.BotToken, Chats: tg.Chats, ServerURL: tg.APIURL, Logger: log}, tg.Tokens)
	}
	if sl := c.Slack; sl != nil {
		route(&channel.Slack{BotToken: sl.BotToken, AppToken: sl.AppToken, Channel: sl.Channel, Users: sl.Users, APIURL: sl.APIURL, Logger: log}, sl.Tokens)
	}
	if m := c.Email; m != nil {
		route(&channel.Email{SMTPAddr: m.SMTPAddr, SMTPUser: m.SMTPUser, SMTPPassword: m.SMTPPassword, From: m.From, To: m.To,
			IMAPAddr: m.IMAPAddr, IMAPUser: m.IMAPUser, IMAPPassword: m.IMAPPassword, Mailbox: m.Mailbox, Senders: m.Senders,
			TLS: m.TLS, Logger: log}, m.Tokens)
	}
	if len(routes) == 0 {
		return nil, nil
	}
	return &channel.Options{Routes: routes, PublicURL: strings.TrimRight(c.PublicURL, "/")}, nil
}

// warnReadable warns when the config file holds channel secrets and
// others may read it.
func warnReadable(path string, cfg *fileConfig, log *slog.Logger) {
	if path == "" || !cfg.Channels.secret() {
		return
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("the config file holds channel secrets and others can read it: chmod 600 it", "file", path, "mode", st.Mode().Perm().String())
	}
}

// checkWords says what a channel's check found: each credential refused
// in the words the server's log uses, naming the setting to fix.
func checkWords(err error) string {
	var words []string
	for _, e := range unjoin(err) {
		var re *channel.RefusedError
		if errors.As(e, &re) {
			words = append(words, "REFUSED: "+re.Fix())
			continue
		}
		if where := unreachable(e); where != "" {
			words = append(words, "FAILED: cannot reach "+where+": check this machine's network (a proxy, a firewall, DNS) and the channel's api_url, if set ("+e.Error()+")")
			continue
		}
		words = append(words, "FAILED: "+e.Error())
	}
	return strings.Join(words, "\n  ")
}

// unreachable is the host err failed to reach (its name not found, or
// no connection made to it), "" when err is another failure.
func unreachable(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Addr != nil {
		return op.Addr.String()
	}
	return ""
}

// unjoin is the errors err joins (errors.Join), or err.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// checkChannels sends a test notice through every channel the config
// sets and says, in words, what each answered.
func checkChannels(cfg *fileConfig, cfgPath string, stdout io.Writer) error {
	o, err := channelOptions(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if o == nil {
		// Where to write the table: the file read, or where one is looked for.
		where := "in " + cfgPath + ": add"
		if cfgPath == "" {
			where = "and no config file was found (./" + configName + ", then " +
				filepath.Join(config.AppDir(), configName) + "): write one with"
		}
		_, _ = fmt.Fprintf(stdout, "No channel is set %s a [channels.ntfy], [channels.telegram], [channels.slack], [channels.email] or [channels.webhook] table, as docs/channels.md shows.\n", where)
		return nil
	}
	n := channel.Notice{Event: hub.Event{Kind: hub.Asked, At: time.Now(), AskedAt: time.Now(),
		Request: hub.Request{Kind: wire.AskQuestion, ID: "check-" + wire.NewID()[:8], AgentName: "agentassistant-srv -check-channels",
			Text: "A test from agentassistant: this channel reaches you. It asks nothing: a reply to it answers nothing."}}, Test: true}
	failed := 0
	seen := map[channel.Channel]bool{}
	for _, chs := range o.Routes {
		for _, c := range chs {
			if seen[c] {
				continue
			}
			seen[c] = true
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := c.Send(ctx, n)
			if lc, ok := c.(channel.LoginChecker); ok {
				// The listener's own login (Slack's app token, IMAP's),
				// which a send does not try.
				err = errors.Join(err, lc.CheckLogin(ctx))
			}
			cancel()
			if err != nil {
				failed++
				_, _ = fmt.Fprintf(stdout, "%s: %s\n", c.Name(), checkWords(err))
				continue
			}
			_, _ = fmt.Fprintf(stdout, "%s: sent; look for the test message\n", c.Name())
		}
	}
	// Only ntfy's buttons and a webhook's answer.url post to public_url;
	// Telegram's and Slack's come back through their own connection.
	var without []string
	if cfg.Channels.Ntfy != nil {
		without = append(without, "ntfy's notifications carry no buttons to answer with")
	}
	if cfg.Channels.Webhook != nil {
		without = append(without, "a webhook's events carry no answer.url (its signed answers still work)")
	}
	if o.PublicURL == "" && len(without) > 0 {
		_, _ = fmt.Fprintf(stdout, "Note: [channels] public_url is not set: %s. Set it to this server's address as your phone reaches it (docs/channels.md).\n", strings.Join(without, "; "))
	}
	if failed > 0 {
		return fmt.Errorf("%d channel(s) failed", failed)
	}
	return nil
}
