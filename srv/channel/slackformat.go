package channel

import (
	"cmp"
	"net/url"
	"regexp"
	"strings"

	"github.com/yuin/goldmark/ast"
)

// A question's markdown in Slack: Block Kit's mrkdwn, rendered by
// markup.go. Every <, > and & the agent wrote is escaped, and the text
// object is verbatim, so an agent's text cannot mention anyone
// (<!channel>, <@U…>) nor link a conversation; an image is named (Slack
// shows no data: URL), or a link to it.

// slackMrkdwn renders md as Slack's mrkdwn.
func slackMrkdwn(md string) string { return render(mrkdwn{}, md) }

// mrkdwn is Slack's mrkdwn.
type mrkdwn struct{}

// slackEscape escapes what mrkdwn reads as markup of its own.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (mrkdwn) esc(s string) string { return slackEscape.Replace(s) }

// slackEscClip is s escaped (slackEscape) and cut to at most n bytes,
// marked "…", never inside an escape.
func slackEscClip(s string, n int) string {
	if e := slackEscape.Replace(s); len(e) <= n {
		return e
	}
	var b strings.Builder
	for _, r := range s {
		e := slackEscape.Replace(string(r))
		if b.Len()+len(e)+len("…") > n {
			break
		}
		b.WriteString(e)
	}
	return b.String() + "…"
}

func (mrkdwn) marks(n ast.Node) (string, string) {
	m := "~"
	switch n := n.(type) {
	case *ast.Heading:
		m = "*"
	case *ast.Emphasis:
		m = "_"
		if n.Level >= 2 {
			m = "*"
		}
	}
	return m, m
}

func (mrkdwn) codeSpan(r *mdRenderer, c *ast.CodeSpan) {
	r.b.WriteString("`")
	r.inline(c)
	r.b.WriteString("`")
}

func (mrkdwn) codeBlock(r *mdRenderer, c ast.Node) {
	fenced := c.Kind() != ast.KindHTMLBlock
	if fenced {
		r.b.WriteString("```\n")
	}
	r.lines(c.Lines())
	if fenced {
		r.b.WriteString("```")
	}
	r.b.WriteString("\n\n")
}

func (mrkdwn) quote(inner string) string { return "> " + strings.ReplaceAll(inner, "\n", "\n> ") }

// image is a link to an http(s) image, named (imageName); any other is
// its name.
func (mrkdwn) image(r *mdRenderer, img *ast.Image) {
	name := imageName(childText(img, r.src))
	if u, err := url.Parse(string(img.Destination)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		r.b.WriteString("<" + slackURL(u) + "|" + slackEscape.Replace(strings.ReplaceAll(name, "|", "¦")) + ">")
		return
	}
	r.esc(name)
}

// link writes an http(s) or mailto link as <url|text>; any other kind is
// its text.
func (mrkdwn) link(r *mdRenderer, dest string, n ast.Node, label string) {
	u, ok := linkable(dest)
	if !ok {
		r.inline(n)
		return
	}
	if label == "" && spoofs(linkText(n, r.src), u) {
		// Its text names another place: shown as text, with the one
		// link where it goes.
		r.inline(n)
		r.b.WriteString(" (<" + slackURL(u) + ">)")
		return
	}
	inner := mdRenderer{d: r.d, src: r.src}
	if label != "" {
		inner.esc(label)
	} else {
		inner.inline(n)
	}
	// "|" ends a link's address and starts its text: the text keeps none.
	r.b.WriteString("<" + slackURL(u) + "|" + strings.ReplaceAll(inner.b.String(), "|", "¦") + ">")
}

// slackURL is u as a link's address: escaped as mrkdwn wants, and with
// no "|" (which would end it).
func slackURL(u *url.URL) string {
	return strings.ReplaceAll(slackEscape.Replace(u.String()), "|", "%7C")
}

// slackRef is a mention, a channel or an address in a message's text as
// Slack hands it: <@U1>, <#C1|ops>, <!here>, <https://…|text>.
var slackRef = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

// slackUnescape undoes slackEscape.
var slackUnescape = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

// slackTyped is a message's text as the person typed it: Slack hands the
// &, < and > typed escaped, and a mention or an address as a reference
// (docs.slack.dev/messaging/formatting-message-text), read here as the
// name shown (@U1, #ops, @here) or the address after its text.
func slackTyped(text string) string {
	text = slackRef.ReplaceAllStringFunc(text, func(ref string) string {
		m := slackRef.FindStringSubmatch(ref)
		to, label := m[1], m[2]
		switch {
		case strings.HasPrefix(to, "@"), strings.HasPrefix(to, "#"):
			return to[:1] + cmp.Or(label, to[1:])
		case strings.HasPrefix(to, "!"):
			return cmp.Or(label, "@"+to[1:])
		case label == "" || label == to || "mailto:"+label == to:
			return to
		}
		return label + " (" + to + ")"
	})
	return slackUnescape.Replace(text)
}
