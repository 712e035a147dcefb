package channel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// Ntfy publishes to an ntfy topic (ntfy.sh or a server of one's own),
// with JSON publishing (https://docs.ntfy.sh/publish/#publish-as-json):
// a question with its buttons as "http" actions that post the answer,
// with a capability, to the server's public address: the phone must
// reach it. A question settled elsewhere is published again, quietly and
// without its buttons, under the same sequence ID: ntfy 2.16 and later
// replace the notification with it; older servers show it as a message
// of its own.
type Ntfy struct {
	// URL is the ntfy server (default https://ntfy.sh); Topic the topic
	// (as secret as a password on a public server); AccessToken, when
	// set, is sent as a bearer token.
	URL, Topic, AccessToken string
	Client                  *http.Client
}

// lead names the topic: one instance of a cluster at a time makes its
// follow-ups owed (it takes no answers itself: they come as posts).
func (c *Ntfy) lead() string {
	return leadName("ntfy", cmp.Or(strings.TrimRight(c.URL, "/"), "https://ntfy.sh"), c.Topic)
}

// Name is "ntfy".
func (*Ntfy) Name() string { return "ntfy" }

type ntfyAction struct {
	Action  string            `json:"action"`
	Label   string            `json:"label"`
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Clear   bool              `json:"clear,omitempty"`
}

type ntfyMessage struct {
	Topic    string       `json:"topic"`
	Title    string       `json:"title"`
	Message  string       `json:"message"`
	Priority int          `json:"priority"`
	Tags     []string     `json:"tags,omitempty"`
	Click    string       `json:"click,omitempty"`
	Actions  []ntfyAction `json:"actions,omitempty"`
	Markdown bool         `json:"markdown,omitempty"`
	// SequenceID names the question's notification, so the one saying
	// it is settled replaces it.
	SequenceID string `json:"sequence_id,omitempty"`
}

// ntfy shows three actions at most.
const ntfyMaxActions = 3

// offers are the answers of a question's buttons: its first options, or
// the quick replies; none when it takes several of its options. Its
// capability answers with them alone: whoever reads the topic reads it.
func (c *Ntfy) offers(req hub.Request) []string {
	if multiOf(req) {
		return []string{}
	}
	labels, _ := buttonsOf(req)
	return slices.Clone(labels[:min(len(labels), ntfyMaxActions)])
}

// ntfyMaxMessage is the longest message ntfy takes as a message, in
// bytes: a longer one it makes an attachment, or refuses.
const ntfyMaxMessage = 4096

// Send publishes n.
func (c *Ntfy) Send(ctx context.Context, n Notice) error {
	m := ntfyMessage{Topic: c.Topic, Title: title(n), Click: n.AppURL, SequenceID: n.Seq}
	switch n.Kind {
	case hub.Asked:
		// Its buttons show three labels at most, and no description: the
		// options are listed, and the question has what they leave.
		// A question taking several of its options has none as a
		// button (a tap answers with one): they are listed, and chosen
		// in the app, which a "view" action opens on the question. So
		// are they on a server with no public address (no buttons).
		multi := multiOf(n.Request)
		var listed string
		if opts, some := described(n.Request); some || cutOnButton(opts, maxShownNtfyButton) || len(opts) > ntfyMaxActions || multi || len(opts) > 0 && n.AnswerURL == "" {
			listed = "\n"
			for _, o := range opts {
				listed += "\n- " + o.line()
			}
		}
		if multi {
			listed += "\n\nChoose one or more in the app."
		}
		const cutMark = "\n…\n\n_(" + restInApp + ")_"
		question, cut, markdown := ntfyText(n.Request.Text, cutMark, listed, min(3000, ntfyMaxMessage-len(listed)-len(cutMark)))
		m.Message, m.Priority, m.Markdown = question, 4, markdown
		switch {
		case cut && markdown:
			m.Message += cutMark
		case cut: // plain lines, shown as they are: no italics
			m.Message += "\n…\n\n(" + restInApp + ")"
		}
		m.Message += listed
		m.Tags = []string{"question"}
		switch {
		case multi && n.AppURL != "":
			m.Click = appLink(n)
			m.Actions = []ntfyAction{{Action: "view", Label: "Choose…", URL: m.Click, Clear: true}}
		case multi:
		case n.AnswerURL != "":
			for _, label := range c.offers(n.Request) {
				body, _ := json.Marshal(map[string]string{"cap": n.Cap, "text": label})
				m.Actions = append(m.Actions, ntfyAction{Action: "http", Label: label, URL: n.AnswerURL, Method: http.MethodPost,
					Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body), Clear: true})
			}
		}
	default:
		// It replaces the question's notification: it still says which.
		m.Message, m.Priority = "No answer is needed any more.", 2
		if q, cut := clipText(Plain(n.Request.Text), 200); q != "" {
			if cut {
				q += " …"
			}
			m.Message = q + "\n\n" + m.Message
		}
		m.Tags = []string{"white_check_mark"}
		if n.Kind != hub.Answered {
			m.Tags = []string{"hourglass"}
		}
	}
	b, _ := json.Marshal(m)
	base := cmp.Or(strings.TrimRight(c.URL, "/"), "https://ntfy.sh")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("ntfy: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sequence-ID", m.SequenceID)
	if c.AccessToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.AccessToken)
	}
	err = do(c.Client, req, "ntfy")
	if re := c.refusal(err); re != nil {
		return re
	}
	return err
}

// refusal is err as ntfy's refusal of the access token, or of the topic
// without one (401, 403); nil when it is none.
func (c *Ntfy) refusal(err error) *RefusedError {
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusUnauthorized && se.code != http.StatusForbidden {
		return nil
	}
	// ntfy says why as JSON: {"code":40301,"http":403,"error":"forbidden",...}.
	words := se.body
	var said struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(se.body), &said) == nil && said.Error != "" {
		words = said.Error
	}
	words = redact(errors.New(words), c.AccessToken, c.Topic).Error()
	re := &RefusedError{Channel: "ntfy", Setting: "[channels.ntfy] access_token", Said: serviceSaid("ntfy", strconv.Itoa(se.code), Clip(words, 200))}
	switch {
	case c.AccessToken == "":
		re.Setting = "[channels.ntfy] topic"
		re.Hint = "the server lets no one publish to it without a login: set access_token, or pick another topic"
	case se.code == http.StatusForbidden:
		re.Hint = "the token's user may not publish to this topic: grant it on the server (ntfy access), or check topic"
	default:
		re.Hint = "the server does not know the token: make one with ntfy token add, or in the web app's account page"
	}
	return re
}

// do sends req and says what the service answered when it is no 2xx;
// a redirect is such an answer, not followed (noRedirects).
func do(client *http.Client, req *http.Request, name string) error {
	c := *cmp.Or(client, http.DefaultClient)
	c.CheckRedirect = noRedirects
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, hideURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &statusError{name: name, code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	return nil
}

// statusError is a service's answer other than 2xx.
type statusError struct {
	name string
	code int
	body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.name, e.code, e.body)
}

// hideURL is err with the URL it names cut to its scheme and host: a
// receiver's path or query is often its credential (a Home Assistant
// webhook ID, a chat's incoming-webhook token, ?auth=), and the error is
// logged.
func hideURL(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	where := "the receiver"
	if perr == nil && u.Host != "" {
		where = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() + "/…"
	}
	return fmt.Errorf("%s %s: %w", ue.Op, where, ue.Err)
}
