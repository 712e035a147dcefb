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
	// Asked: where and how to answer without the token.
	Answer *webhookAnswer `json:"answer,omitempty"`
	// Answered: by whom, and what.
	AnsweredBy string `json:"answered_by,omitempty"`
	Reply      string `json:"reply,omitempty"`
	Reason     string `json:"reason,omitempty"`
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
		Project: n.Request.ProjectDirectory, Agent: n.Request.AgentName, At: n.At.UTC(), Reason: n.Reason}
	switch n.Kind {
	case hub.Asked:
		e.Text = n.Request.Text
		e.Answer = &webhookAnswer{Signed: "/channels/webhook/" + w.ID + "/answer", Cap: n.Cap, URL: n.AnswerURL}
	case hub.Answered:
		e.AnsweredBy = n.Reply.Nickname
		for _, c := range n.Reply.Contents {
			if t := c.GetText().GetText(); t != "" {
				e.Reply = t
				break
			}
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

// Answers takes answers signed with the webhook's secret, for a question
// of its token or of its peers': POST {"id",
// "text", "kind"} ("question" by default, or "report"), within the
// signature window, each signature once: 200 {"ok": true}; 401 for a
// signature that does not verify or a timestamp out of the window; 409
// for a replay or a question no longer pending.
func (w *Webhook) Answers(h *hub.Hub) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxSignedAnswer))
		if err != nil {
			http.Error(rw, "the body is too large", http.StatusRequestEntityTooLarge)
			return
		}
		sig := r.Header.Get(SignatureHeader)
		ts, err := strconv.ParseInt(r.Header.Get(TimestampHeader), 10, 64)
		now := w.now()
		if err != nil || now.Sub(time.Unix(ts, 0)).Abs() > signWindow ||
			!hmac.Equal([]byte(sig), []byte(Sign(w.Secret, ts, body))) {
			http.Error(rw, "the signature does not verify, or its timestamp is not within five minutes of the server's clock", http.StatusUnauthorized)
			return
		}
		if !w.once(sig, now) {
			http.Error(rw, "this signed answer was taken already (a replay)", http.StatusConflict)
			return
		}
		var a struct {
			ID   string `json:"id"`
			Text string `json:"text"`
			Kind string `json:"kind"`
			By   string `json:"by"`
		}
		if err := decodeAnswer(body, &a); err != nil || a.ID == "" || strings.TrimSpace(a.Text) == "" || !utf8.ValidString(a.Text) ||
			a.Kind != "" && a.Kind != "question" && a.Kind != "report" {
			w.forget(sig) // not taken: it may come again, mended
			http.Error(rw, `the body must be {"id": "...", "text": "...", "kind": "question"|"report", "by": "..."}`, http.StatusBadRequest)
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
			http.Error(rw, "the id names a pending question of more than one token: answer it in the app", http.StatusConflict)
			return
		}
		tok := tokens[0]
		if len(pendingIn) == 1 {
			tok = pendingIn[0]
		}
		err = (Answers{hub: h}).Reply(tok, kind, a.ID, a.Text, who, w.ID, "webhook")
		switch {
		case errors.Is(err, hub.ErrNotPending):
			http.Error(rw, "the question is no longer pending", http.StatusConflict)
		case errors.Is(err, hub.ErrNotAnOption):
			w.forget(sig) // not taken: an answer it allows may come under it
			http.Error(rw, err.Error(), http.StatusBadRequest)
		case err != nil:
			// Not taken: the sender may try the same signed request again.
			w.forget(sig)
			http.Error(rw, "the answer cannot be saved now: "+err.Error(), http.StatusServiceUnavailable)
		default:
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(`{"ok":true}` + "\n"))
		}
	})
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
var answerKeys = []string{"id", "text", "kind", "by"}

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
