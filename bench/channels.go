package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// The channels' names, in the order they are reported.
var channelNames = []string{"ntfy", "webhook", "telegram", "slack", "email"}

const (
	benchBotToken = "123456:bench-bot-token"
	benchSlackBot = "xoxb-bench-bot-token"
	benchSlackApp = "xapp-1-A1-bench-app-token"
	benchChat     = 42
	benchPublic   = "https://aa.example.org"
	benchHookKey  = "bench-webhook-secret-0123456789" // #nosec G101 -- made up, for a double
)

// channelDoubles are one double of each channel's outside service.
type channelDoubles struct {
	ntfy, hook *httpReceiver
	mail       *smtpReceiver
	tg         *telegramtest.API
	sl         *slacktest.API
}

func startChannelDoubles() (*channelDoubles, error) {
	mail, err := newSMTPReceiver()
	if err != nil {
		return nil, err
	}
	return &channelDoubles{ntfy: newHTTPReceiver(http.StatusOK, false), hook: newHTTPReceiver(http.StatusOK, false), mail: mail,
		tg: telegramtest.New(benchBotToken), sl: slacktest.New(benchSlackBot, benchSlackApp)}, nil
}

func (d *channelDoubles) close() {
	d.ntfy.Close()
	d.hook.Close()
	d.mail.close()
	d.tg.Close()
	d.sl.Close()
}

// config is the server's [channels] pointed at the doubles.
func (d *channelDoubles) config() string {
	return fmt.Sprintf(`
[channels]
public_url = %q

[channels.ntfy]
url = %q
topic = "aa-bench"

[channels.webhook]
id = "bench"
url = %q
secret = %q

[channels.telegram]
bot_token = %q
chats = [%d]
api_url = %q

[channels.slack]
bot_token = %q
app_token = %q
channel = "U42"
users = ["U42"]
api_url = %q

[channels.email]
smtp_addr = %q
from = "aa@example.org"
to = ["ana@example.org"]
tls = "none"
`, benchPublic, d.ntfy.URL, d.hook.URL, benchHookKey, benchBotToken, benchChat, d.tg.URL, benchSlackBot, benchSlackApp, d.sl.APIURL(), d.mail.addr)
}

// channels are the same channels as the server's config makes, for the
// floor to call directly.
func (d *channelDoubles) channels(token string) map[string]channel.Channel {
	client := &http.Client{Timeout: 20 * time.Second}
	return map[string]channel.Channel{
		"ntfy":     &channel.Ntfy{URL: d.ntfy.URL, Topic: "aa-bench", Client: client},
		"webhook":  &channel.Webhook{ID: "bench", URL: d.hook.URL, Secret: benchHookKey, Token: token, Client: client},
		"telegram": &channel.Telegram{BotToken: benchBotToken, Chats: []int64{benchChat}, ServerURL: d.tg.URL},
		"slack":    &channel.Slack{BotToken: benchSlackBot, AppToken: benchSlackApp, Channel: "U42", Users: []string{"U42"}, APIURL: d.sl.APIURL()},
		"email":    &channel.Email{SMTPAddr: d.mail.addr, From: "aa@example.org", To: []string{"ana@example.org"}, TLS: "none"},
	}
}

// nth waits for the n-th (from 1) notice of name's kind (asked: the
// question; else its settlement) and returns when it came and its text.
func (d *channelDoubles) nth(ctx context.Context, name string, asked bool, n int) (time.Time, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// ntfy, the webhook and e-mail take each event as one more request
	// or mail: a question's is the (2n-1)-th when each was settled
	// before the next; the floor sends questions only.
	switch name {
	case "ntfy", "webhook", "email":
		a := map[string]*arrivals{"ntfy": d.ntfy.got, "webhook": d.hook.got, "email": d.mail.got}[name]
		return a.nth(ctx, name, n)
	case "telegram":
		method := map[bool]string{true: "sendMessage", false: "editMessageText"}[asked]
		c, err := d.tg.Wait(ctx, method, n)
		return c.At, c.Form["text"], err
	default:
		method := map[bool]string{true: "chat.postMessage", false: "chat.update"}[asked]
		c, err := d.sl.Wait(ctx, method, n)
		return c.At, c.Form["blocks"], err
	}
}

// channelsStep: one question to five channels (ntfy, a webhook,
// Telegram, Slack, e-mail), each pointed at a double in this process;
// per channel, the time from ask_question until its double has the
// question, beside the floor (the same channel's Send called directly
// on the same kind of double, no server) and the inbox's delivery, with
// the same inbox figure from a server with no channel, the questions of
// all three alternating.
func channelsStep(ctx context.Context, c config, r *report) error {
	served, err := startChannelDoubles()
	if err != nil {
		return err
	}
	defer served.close()
	floorDoubles, err := startChannelDoubles()
	if err != nil {
		return err
	}
	defer floorDoubles.close()
	withCh, err := startServerWith(c, serverExtras{config: served.config()})
	if err != nil {
		return err
	}
	defer withCh.stop()
	bare, err := startServer(c)
	if err != nil {
		return err
	}
	defer bare.stop()
	floorCh := floorDoubles.channels(withCh.token)

	var inboxWith, inboxBare receipts
	for _, x := range []struct {
		s  *server
		rc *receipts
	}{{withCh, &inboxWith}, {bare, &inboxBare}} {
		rc := x.rc
		if _, err := dialWS(ctx, x.s, "inbox", func(_ *wsClient, m *pb.WebsocketMessage) {
			if m.Cmd == "AskQuestion" {
				rc.note()
			}
		}); err != nil {
			return err
		}
	}
	// Socket Mode is up before the first question, as it would be.
	if err := served.sl.Connected(ctx); err != nil {
		return err
	}

	hc := httpClient()
	// ask asks s's token question id and returns how long until its
	// inbox device had it; answered answers it and waits for the call.
	ask := func(s *server, rc *receipts, id string, then func() error) (time.Duration, error) {
		cl := agentassistprotoconnect.NewSrvAgentAssistClient(hc, s.url)
		reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(hc, s.url)
		rc.reset()
		done := make(chan error, 1)
		t0 := time.Now()
		go func() {
			_, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: s.token, Request: &pb.McpAskQuestionRequest{
				Question: "Deploy " + id + " now?", ProjectDirectory: "/srv/shop", AgentName: "bench", Timeout: 60}})
			done <- err
		}()
		at, err := rc.wait("question "+id, 1)
		if err != nil {
			return 0, err
		}
		if then != nil {
			if err := then(); err != nil {
				return 0, err
			}
		}
		if _, err := reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: s.token, Response: &pb.AskQuestionResponse{ID: id,
			Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}}}}); err != nil {
			return 0, err
		}
		return at.Sub(t0), <-done
	}

	const warm = 2
	perChannel := map[string][]time.Duration{}
	floorPer := map[string][]time.Duration{}
	var dsWith, dsBare []time.Duration
	for q := 1; q <= warm+c.channelQs; q++ {
		// The floor: the five channels' Send at once, as the server's
		// five senders do.
		t0 := time.Now()
		id := fmt.Sprint("floor-", q)
		now := time.Now()
		n := channel.Notice{Event: hub.Event{Kind: hub.Asked, Token: withCh.token, At: now, AskedAt: now,
			Request: hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy " + id + " now?", ProjectDirectory: "/srv/shop", AgentName: "bench", Timeout: time.Minute}},
			Cap: wire.NewID() + wire.NewID(), AnswerURL: benchPublic + "/push/answer", AppURL: benchPublic + "/"}
		var wg sync.WaitGroup
		errs := make(chan error, len(floorCh))
		for name, ch := range floorCh {
			wg.Go(func() {
				if err := ch.Send(ctx, n); err != nil {
					errs <- fmt.Errorf("floor %s: %w", name, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		for _, name := range channelNames {
			at, text, err := floorDoubles.nth(ctx, name, true, q)
			if err != nil {
				return err
			}
			if !strings.Contains(text, id) && name != "email" && name != "slack" {
				return fmt.Errorf("floor %s got %q, not %s", name, text, id)
			}
			if q > warm {
				floorPer[name] = append(floorPer[name], at.Sub(t0))
			}
		}

		// The server with the channels.
		id = fmt.Sprint("ch-", q)
		var arrived map[string]time.Time
		t0 = time.Now()
		d, err := ask(withCh, &inboxWith, id, func() error {
			arrived = map[string]time.Time{}
			for _, name := range channelNames {
				at, _, err := served.nth(ctx, name, true, questionNotice(name, q))
				if err != nil {
					return err
				}
				arrived[name] = at
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Each channel has the settlement before the next question, so
		// that it finds every channel's queue empty.
		for _, name := range channelNames {
			if _, _, err := served.nth(ctx, name, false, settledNotice(name, q)); err != nil {
				return err
			}
		}
		if q > warm {
			dsWith = append(dsWith, d)
			for name, at := range arrived {
				perChannel[name] = append(perChannel[name], at.Sub(t0))
			}
		}

		// The server with no channel.
		d, err = ask(bare, &inboxBare, fmt.Sprint("bare-", q), nil)
		if err != nil {
			return err
		}
		if q > warm {
			dsBare = append(dsBare, d)
		}
		time.Sleep(5 * time.Millisecond) // the reply notifications drain
	}
	ms := func(ds []time.Duration, p float64) float64 { return pct(ds, p) / 1000 }
	for _, name := range channelNames {
		ds, fds := perChannel[name], floorPer[name]
		r.add(fmt.Sprintf("channels: %s has the question, p50", name), ms(ds, 50), "ms").Note =
			fmt.Sprintf("floor (the channel's Send called directly, no server): p50 %.2f ms", ms(fds, 50))
		r.add(fmt.Sprintf("channels: %s has the question, p99", name), ms(ds, 99), "ms").Note =
			fmt.Sprintf("floor: p99 %.2f ms", ms(fds, 99))
	}
	r.add("channels: the inbox has it, with the five channels, p50", ms(dsWith, 50), "ms").Note =
		fmt.Sprintf("p99 %.2f ms; %d questions", ms(dsWith, 99), len(dsWith))
	r.add("channels: the inbox has it, no channel, alongside, p50", ms(dsBare, 50), "ms").Note =
		fmt.Sprintf("p99 %.2f ms", ms(dsBare, 99))
	r.add("channels: inbox p50 with channels / without", pct(dsWith, 50)/pct(dsBare, 50), "×").target("≤ 1.2×", pct(dsWith, 50) <= 1.2*pct(dsBare, 50))
	return nil
}

// questionNotice is which of its double's arrivals the q-th question is,
// when each question was settled before the next; settledNotice is its
// settlement's.
func questionNotice(name string, q int) int {
	if name == "telegram" || name == "slack" {
		return q // its own method: sendMessage, chat.postMessage
	}
	return 2*q - 1
}

func settledNotice(name string, q int) int {
	if name == "telegram" || name == "slack" {
		return q // editMessageText, chat.update
	}
	return 2 * q
}
