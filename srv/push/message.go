package push

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// message is what a push carries to the service worker, as JSON. It
// never holds the token: an answer from the notification goes back with
// a capability (srv/answercap).
type message struct {
	V    int    `json:"v"`
	Type string `json:"type"` // "ask", or "settled": close its notification
	ID   string `json:"id"`
	// Tag names the question's notification, so the settled push (and a
	// later one for the same question) replaces it.
	Tag string `json:"tag"`
	// Kind: "question" or "report".
	Kind  string `json:"kind,omitempty"`
	Title string `json:"title,omitempty"`
	// Asker and Project are the title's parts ("" for an agent that gave
	// no name, a question of no project): the device words the title in
	// the language chosen in its app from them.
	Asker   string `json:"asker,omitempty"`
	Project string `json:"project,omitempty"`
	Body    string `json:"body,omitempty"`
	// Actions are the buttons: the question's options, or the person's
	// first quick replies. Posted as the answer's text.
	Actions []string `json:"actions,omitempty"`
	// Choose: the question takes several of its options, which one tap
	// cannot pick: the first button opens the app on its card instead,
	// and Actions are only the quick replies it takes besides.
	Choose bool `json:"choose,omitempty"`
	// Options: how many options a question of one choice offers, so
	// that a notification showing fewer of them as buttons says the
	// rest are in the app.
	Options int `json:"options,omitempty"`
	// Cap and Answer: where and with what an action answers.
	Cap    string `json:"cap,omitempty"`
	Answer string `json:"answer,omitempty"`
	// URL opens the app on the question.
	URL string `json:"url"`
	// Outcome says how it was settled ("answered on Pixel 8 · Chrome").
	Outcome string `json:"outcome,omitempty"`
	// Waiting is how many of the token's questions and reports wait for
	// an answer once this push's is counted (asked) or not (settled):
	// the app's badge, which the service worker sets with no page open.
	Waiting int `json:"waiting"`
	// Sub is the subscription's ID: a browser subscribed under several
	// tokens gets each one's Waiting under its own, and shows their sum.
	// A random name the device holds already; it says nothing of the
	// token.
	Sub string `json:"sub,omitempty"`
}

// Limits of what a push carries: a push service takes 4,096 bytes,
// encrypted and padded; the text is cut well below.
const (
	maxBody    = 600
	maxTitle   = 120
	maxActions = 3
	maxAction  = 40
)

// tagOf names a question's notification and its pushes' Topic (RFC 8030:
// at most 32 base64url characters), the same for one question on every
// device, from its room and ID.
func tagOf(room, id string) string {
	d := sha256.Sum256([]byte(room + "\x00" + id))
	return base64.RawURLEncoding.EncodeToString(d[:18]) // 24 characters
}

// askMessage is the push for a question or report asked, without its
// capability: it is made for the Actions the message offers.
func askMessage(ev hub.Event, room string, sub Subscription) message {
	req := ev.Request
	kind, verb := "question", "asks"
	if req.Kind != wire.AskQuestion {
		kind, verb = "report", "reports"
	}
	who, project := channel.Asker(req), channel.Project(req.ProjectDirectory)
	title := channel.Isolated(who) + " " + verb
	if project != "" {
		title = channel.Isolated(project) + " · " + title
	}
	if who == channel.Asker(hub.Request{}) {
		who = "" // the server's words for none: the device has its own
	}
	m := message{V: 1, Type: "ask", ID: req.ID, Tag: tagOf(room, req.ID), Kind: kind,
		Title: channel.Clip(title, maxTitle), Asker: channel.Clip(who, maxTitle), Project: channel.Clip(project, maxTitle),
		Body: channel.Clip(channel.Plain(channel.Cut(req.Text, maxBody)), maxBody), URL: "/?request=" + url.QueryEscape(req.ID), Sub: sub.ID}
	opts, multiple, custom := wire.OptionsOf(req.Questions)
	if len(opts) > 0 && multiple {
		// A person picks several: no button can, so the first opens the
		// card, and the quick replies follow where words of one's own are
		// taken, but none that reads as an option (a tap would then pick
		// that one alone).
		m.Choose = true
		if custom {
			for _, r := range sub.Replies {
				if len(m.Actions) == maxActions-1 {
					break
				}
				r = channel.Clip(strings.TrimSpace(r), maxAction)
				if chosen, _ := wire.Chosen(opts, []string{r}); r != "" && len(chosen) == 0 {
					m.Actions = append(m.Actions, r)
				}
			}
		}
		return m
	}
	if len(opts) > 0 {
		// The question's own options, the first that fit: an action posts
		// its label as the answer, so a label is never cut (the others
		// are in the app).
		m.Options = len(opts)
		for _, o := range opts {
			if len(m.Actions) == maxActions {
				break
			}
			if l := o.GetLabel(); len(l) <= maxAction {
				m.Actions = append(m.Actions, l)
			}
		}
		return m
	}
	for _, r := range sub.Replies {
		if len(m.Actions) == maxActions {
			break
		}
		if r = channel.Clip(strings.TrimSpace(r), maxAction); r != "" {
			m.Actions = append(m.Actions, r)
		}
	}
	return m
}

// settledMessage is the push that closes a question's notification on
// sub's device. An answer that chose among what the question offered
// (its options, or the quick replies sub's notification showed as
// buttons) is named in its Outcome, as the channels name it; the
// person's own words never are: a notification shows on a lock screen
// (channel.Chosen). A close taken over from another instance's
// record (closes.go) holds the question's ID alone, and an option
// chosen goes unnamed there.
func settledMessage(ev hub.Event, room string, sub Subscription) message {
	m := message{V: 1, Type: "settled", ID: ev.Request.ID, Tag: tagOf(room, ev.Request.ID), URL: "/?request=" + url.QueryEscape(ev.Request.ID), Sub: sub.ID}
	switch ev.Kind {
	case hub.Answered:
		m.Outcome = "Answered"
		if ev.Reply != nil && ev.Reply.Nickname != "" {
			m.Outcome = "Answered on " + channel.Clip(ev.Reply.Nickname, 60)
		}
		if chosen := channel.Chosen(ev.Request, ev.Reply, sub.Replies); len(chosen) > 0 {
			m.Outcome = channel.Clip(m.Outcome+": "+channel.Isolated(strings.Join(chosen, ", ")), maxTitle)
		}
	case hub.TimedOut:
		m.Outcome = "Timed out"
	default:
		m.Outcome = "Withdrawn"
	}
	return m
}

// maxPayload is what one push holds: webpush-go writes a single record
// of 4,096 bytes, of which 16 are the cipher's tag, 86 the header (salt,
// record size, the server's key) and 1 the padding's delimiter.
const maxPayload = 4096 - 16 - 86 - 1

// encode is m as JSON that fits a push. The limits above count bytes of
// text, but JSON writes a control character in six: the body, then the
// title, then the last actions give way until it fits, so a question of
// code is pushed cut rather than refused by the encryption.
func (m message) encode() []byte {
	b := marshal(m)
	for len(b) > maxPayload {
		over := len(b) - maxPayload
		switch {
		case m.Body != "":
			m.Body = cut(m.Body, over)
		case m.Title != "":
			m.Title = cut(m.Title, over)
		case m.Asker != "" || m.Project != "":
			m.Asker, m.Project = "", "" // the title is gone already
		case len(m.Actions) > 0:
			m.Actions = m.Actions[:len(m.Actions)-1]
		default:
			return b // the ID and tag alone: bounded far below by rpc
		}
		b = marshal(m)
	}
	return b
}

// marshal writes m as JSON with <, > and & as they are: the service
// worker reads it as JSON, never as HTML, and they would take six bytes.
func marshal(m message) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // strings, numbers and slices of strings: it cannot fail
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// cut shortens s by at least over bytes (its JSON by as many), marked as
// cut; "" when too little would be left.
func cut(s string, over int) string {
	if n := len(s) - over; n > len("…")+1 {
		return channel.Clip(s, n)
	}
	return ""
}
