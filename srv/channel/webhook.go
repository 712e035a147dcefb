package channel

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Webhook posts every event of its token as JSON to URL, signed with
// HMAC-SHA256 over the timestamp and the body, and takes answers signed
// the same way (Answers): how n8n, Home Assistant or a team's own bot
// plug in.
//
// Signature: the headers X-Agentassistant-Timestamp (Unix seconds) and
// X-Agentassistant-Signature "v1=" + hex(HMAC-SHA256(secret,
// timestamp + "." + body)). A receiver checks it, and that the timestamp
// is within five minutes of its clock.
type Webhook struct {
	// ID names it among the server's webhooks: its answers come to
	// /channels/webhook/{ID}/answer.
	ID, URL, Secret string
	// Token is the room it serves (its answers answer that room's
	// questions only).
	Token  string
	Client *http.Client
	Now    func() time.Time
	// Logger tells of the answers refused (maxRefusalLogs a minute).
	Logger *slog.Logger

	// refusals counts the refused answers told in the log.
	refusals window

	mu   sync.Mutex // held alone
	seen map[string]time.Time
	// peers are the webhooks of the same ID and secret serving other
	// tokens (a config's tokens): the server takes the signed answers
	// of an ID at one address, with one of them. Set by New.
	peers []*Webhook
}

// linkWebhooks makes the webhooks of one ID and secret peers: a signed
// answer at their address answers a question of any of their tokens.
func linkWebhooks(routes map[string][]Channel) {
	type group struct{ id, secret string }
	groups := map[group][]*Webhook{}
	for _, chs := range routes {
		for _, c := range chs {
			if w, ok := c.(*Webhook); ok {
				g := group{w.ID, w.Secret}
				if !slices.Contains(groups[g], w) {
					groups[g] = append(groups[g], w)
				}
			}
		}
	}
	for _, ws := range groups {
		for _, w := range ws {
			w.mu.Lock()
			w.peers = slices.DeleteFunc(slices.Clone(ws), func(p *Webhook) bool { return p == w })
			w.mu.Unlock()
		}
	}
}

// tokens are the tokens whose questions w's signed answers answer: its
// own first, then its peers'.
func (w *Webhook) tokens() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := []string{w.Token}
	for _, p := range w.peers {
		if !slices.Contains(out, p.Token) {
			out = append(out, p.Token)
		}
	}
	return out
}

// Signature headers.
const (
	TimestampHeader = "X-Agentassistant-Timestamp"
	SignatureHeader = "X-Agentassistant-Signature"
)

// signWindow is how far a signed timestamp may be from now.
const signWindow = 5 * time.Minute

// Sign is the signature of body at timestamp ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// lead names its lease in a cluster: its holder sends the questions
// whose first send is owed (asking.go).
func (w *Webhook) lead() string { return leadName("webhook", w.ID, w.URL, w.Token) }

// Name is "webhook".
func (*Webhook) Name() string { return "webhook" }

func (w *Webhook) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// webhookEvent is what a webhook receives.
type webhookEvent struct {
	Type    string    `json:"type"` // asked, answered, withdrawn, timed_out
	ID      string    `json:"id"`
	Kind    string    `json:"kind"` // question, report
	Project string    `json:"project,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Text    string    `json:"text,omitempty"`
	At      time.Time `json:"at"`
	// Asked: the labels of its options, whether several may be chosen
	// together (answered then with "texts"), and where and how to
	// answer without the token.
	Options     []string       `json:"options,omitempty"`
	MultiSelect bool           `json:"multi_select,omitempty"`
	Answer      *webhookAnswer `json:"answer,omitempty"`
	// Answered: by whom, and what: its first text, and all of them when
	// it has several (the options chosen of a multi_select question).
	AnsweredBy string   `json:"answered_by,omitempty"`
	Reply      string   `json:"reply,omitempty"`
	Replies    []string `json:"replies,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

type webhookAnswer struct {
	// Signed: POST {"id", "text"} to this path of the server, signed as
	// the events are.
	Signed string `json:"signed"`
	// Cap, with URL: POST {"cap", "text"} there, good once.
	Cap string `json:"cap,omitempty"`
	URL string `json:"url,omitempty"`
}

func kindWord(k wire.Kind) string {
	if k == wire.AskQuestion {
		return "question"
	}
	return "report"
}

// Send posts n, signed.
func (w *Webhook) Send(ctx context.Context, n Notice) error {
	e := webhookEvent{Type: n.Kind.String(), ID: n.Request.ID, Kind: kindWord(n.Request.Kind),
		Project: n.Request.ProjectDirectory, Agent: agentOf(n.Request), At: n.At.UTC(), Reason: n.Reason}
	switch n.Kind {
	case hub.Asked:
		e.Text = n.Request.Text
		if opts, _, _ := wire.OptionsOf(n.Request.Questions); len(opts) > 0 {
			e.Options, _ = buttonsOf(n.Request)
			e.MultiSelect = multiOf(n.Request)
		}
		e.Answer = &webhookAnswer{Signed: "/channels/webhook/" + w.ID + "/answer", Cap: n.Cap, URL: n.AnswerURL}
	case hub.Answered:
		e.AnsweredBy = n.Reply.Nickname
		var all []string
		for _, c := range n.Reply.Contents {
			if t := c.GetText().GetText(); t != "" {
				all = append(all, t)
			}
		}
		if len(all) > 0 {
			e.Reply = all[0]
		}
		if len(all) > 1 {
			e.Replies = all
		}
	}
	body, _ := json.Marshal(e)
	ts := w.now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, Sign(w.Secret, ts, body))
	return do(w.Client, req, "webhook")
}

// maxSignedAnswer bounds a signed answer's body.
const maxSignedAnswer = 8 << 10

// maxRefusalLogs bounds the refused answers a webhook tells in the log
// each minute: anyone who reaches its address can be refused.
const maxRefusalLogs = 10

// Answers takes answers signed with the webhook's secret, for a question
// of its token or of its peers': POST {"id",
// "text", "kind"} ("question" by default, or "report"), within the
// signature window, each signature once: 200 {"ok": true}; 401 for a
// signature that does not verify or a timestamp out of the window; 409
// for a replay or a question no longer pending. Each refusal is told in
// the log with its reason (maxRefusalLogs a minute), never with the
// secret, the signature or the body.
func (w *Webhook) Answers(h *hub.Hub) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id := "" // the question's, once the signature verifies
		refuse := func(code int, msg, reason string) {
			w.logRefused(r, code, reason, id)
			http.Error(rw, msg, code)
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxSignedAnswer))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			refuse(http.StatusRequestEntityTooLarge, "the body is too large", "the body is larger than 8 KiB")
			return
		case err != nil:
			refuse(http.StatusRequestTimeout, "the body did not arrive whole in time; send it again", "the body did not arrive in time")
			return
		}
		sig := r.Header.Get(SignatureHeader)
		ts, err := strconv.ParseInt(r.Header.Get(TimestampHeader), 10, 64)
		now := w.now()
		const unsigned = "the signature does not verify, or its timestamp is not within five minutes of the server's clock"
		switch off := now.Sub(time.Unix(ts, 0)).Abs(); {
		case err != nil:
			refuse(http.StatusUnauthorized, unsigned, "no timestamp in "+TimestampHeader+" (Unix seconds)")
			return
		case off > signWindow:
			refuse(http.StatusUnauthorized, unsigned, fmt.Sprintf("the timestamp is %d s from the server's clock (five minutes at most)", off/time.Second))
			return
		case !hmac.Equal([]byte(sig), []byte(Sign(w.Secret, ts, body))):
			refuse(http.StatusUnauthorized, unsigned, "the signature does not verify (the same secret on both sides? the body signed as sent, after the timestamp and a dot?)")
			return
		}
		if !w.once(sig, now) {
			refuse(http.StatusConflict, "this signed answer was taken already (a replay)", "the same signed request again, once taken (a replay)")
			return
		}
		var a struct {
			ID   string `json:"id"`
			Text string `json:"text"`
			// Texts: the options chosen of a question taking several,
			// one text each, instead of Text.
			Texts []string `json:"texts"`
			Kind  string   `json:"kind"`
			By    string   `json:"by"`
		}
		const shape = `the body must be {"id": "...", "text": "..." (or "texts": ["...", ...]), "kind": "question"|"report", "by": "..."}`
		bad := ""
		switch err := decodeAnswer(body, &a); {
		case err != nil:
			bad = "the body is not one JSON object of id, text or texts, kind and by, each once and in lower case"
		case a.ID == "":
			bad = "no id"
		case a.Texts != nil && a.Text != "":
			bad = "both text and texts"
		case a.Texts != nil && len(a.Texts) == 0:
			bad = "texts is empty"
		case len(a.Texts) > wire.MaxOptions:
			bad = fmt.Sprintf("texts has %d items, more than a question's %d options", len(a.Texts), wire.MaxOptions)
		case a.Texts != nil && slices.ContainsFunc(a.Texts, func(t string) bool { return strings.TrimSpace(t) == "" }):
			bad = "an item of texts is empty"
		case a.Texts != nil && slices.ContainsFunc(a.Texts, func(t string) bool { return !utf8.ValidString(t) }):
			bad = "an item of texts is not UTF-8"
		case a.Texts == nil && strings.TrimSpace(a.Text) == "":
			bad = "no text"
		case !utf8.ValidString(a.Text):
			bad = "the text is not UTF-8"
		case a.Kind != "" && a.Kind != "question" && a.Kind != "report":
			bad = `the kind is neither "question" nor "report"`
		}
		id = Clip(a.ID, 64)
		if bad != "" {
			w.forget(sig) // not taken: it may come again, mended
			refuse(http.StatusBadRequest, shape, bad)
			return
		}
		kind := wire.AskQuestion
		if a.Kind == "report" {
			kind = wire.TaskFinish
		}
		who := "webhook " + w.ID
		if a.By != "" {
			who = Clip(a.By, 64) + " (webhook " + w.ID + ")"
		}
		// The token whose question it is: an ID names one request in a
		// token's room, not across rooms; pending in two, it is
		// ambiguous and answers neither.
		tokens := w.tokens()
		var pendingIn []string
		for _, tok := range tokens {
			if h.Validity(tok, []string{a.ID})[a.ID] {
				pendingIn = append(pendingIn, tok)
			}
		}
		if len(pendingIn) > 1 {
			w.forget(sig)
			refuse(http.StatusConflict, "the id names a pending question of more than one token: answer it in the app",
				"the id names a pending question of more than one of the webhook's tokens")
			return
		}
		tok := tokens[0]
		if len(pendingIn) == 1 {
			tok = pendingIn[0]
		}
		texts := a.Texts
		if texts == nil {
			texts = []string{a.Text}
		}
		err = (Answers{hub: h}).ReplyWith(r.Context(), tok, kind, a.ID, choiceContents(texts), who, w.ID, "webhook")
		switch {
		case errors.Is(err, hub.ErrNotPending):
			refuse(http.StatusConflict, "the question is no longer pending",
				"the question is no longer pending (answered, withdrawn or timed out), or is none of the webhook's tokens'")
		case errors.Is(err, hub.ErrNotAnOption):
			w.forget(sig) // not taken: an answer it allows may come under it
			refuse(http.StatusBadRequest, err.Error(), err.Error())
		case err != nil:
			// Not taken: the sender may try the same signed request again.
			w.forget(sig)
			refuse(http.StatusServiceUnavailable, "the answer cannot be saved now: "+err.Error(), "the answer cannot be saved now: "+err.Error())
		default:
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(`{"ok":true}` + "\n"))
		}
	})
}

// logRefused tells of an answer refused with code, for reason: at most
// maxRefusalLogs a minute, the next one told after them saying how many
// were not.
func (w *Webhook) logRefused(r *http.Request, code int, reason, id string) {
	ok, untold := w.refusals.allow("", maxRefusalLogs, time.Minute, w.now())
	if !ok {
		return
	}
	attrs := []any{"webhook", w.ID, "status", code, "reason", reason, "remote", r.RemoteAddr}
	if id != "" {
		attrs = append(attrs, "id", id)
	}
	if untold > 0 {
		attrs = append(attrs, "untold", untold)
	}
	logOf(w.Logger).Warn("webhook: an answer refused", attrs...)
}

// once reports whether sig is new within the window, and remembers it.
func (w *Webhook) once(sig string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]time.Time{}
	}
	for s, at := range w.seen {
		if now.Sub(at) > 2*signWindow {
			delete(w.seen, s)
		}
	}
	if _, dup := w.seen[sig]; dup {
		return false
	}
	w.seen[sig] = now
	return true
}

// forget lets sig be used again: its answer was not taken.
func (w *Webhook) forget(sig string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.seen, sig)
}

// answerKeys are the keys of a signed answer, as written.
var answerKeys = []string{"id", "text", "texts", "kind", "by"}

// decodeAnswer reads a signed answer into a when it has one meaning:
// one JSON object, each key once and written as answerKeys are
// (encoding/json would take "TEXT" for "text", and the last of a key
// given twice, where another reader takes the first).
func decodeAnswer(body []byte, a any) error {
	members, err := strictjson.Members(body)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	for _, m := range members {
		if !slices.Contains(answerKeys, m.Name) {
			return fmt.Errorf("read the answer: unknown key %.64q", m.Name)
		}
	}
	if err := json.Unmarshal(body, a); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	return nil
}
