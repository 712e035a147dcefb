package channel

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// A question's markdown in Slack: Block Kit's mrkdwn has bold, italic,
// strikethrough, code, preformatted blocks, quotes and links, and
// nothing else; headings become bold lines, lists bullets. Every <, >
// and & the agent wrote is escaped, and the text object is verbatim, so
// an agent's text cannot mention anyone (<!channel>, <@U…>) nor link a
// conversation; an image is named (Slack shows no data: URL), or a link
// to it.

// slackMrkdwn renders md as Slack's mrkdwn.
func slackMrkdwn(md string) string {
	src := []byte(md)
	r := &slackRenderer{src: src}
	r.block(mdParser.Parse(text.NewReader(src)))
	return strings.TrimSpace(r.b.String())
}

type slackRenderer struct {
	src []byte
	b   strings.Builder
	// depth counts the quotes and list items n is inside (maxNesting);
	// quoted, in a quote (mrkdwn nests none).
	depth  int
	quoted bool
}

// slackEscape escapes what mrkdwn reads as markup of its own.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (r *slackRenderer) esc(s string) { r.b.WriteString(slackEscape.Replace(s)) }

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

func (r *slackRenderer) block(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Heading:
			r.b.WriteString("*")
			r.inline(c)
			r.b.WriteString("*\n\n")
		case *ast.Paragraph, *ast.TextBlock:
			r.inline(c)
			r.b.WriteString("\n\n")
		case *ast.ThematicBreak:
			r.b.WriteString("———\n\n")
		case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
			fenced := c.Kind() != ast.KindHTMLBlock
			if fenced {
				r.b.WriteString("```\n")
			}
			ls := c.Lines()
			for i := range ls.Len() {
				s := ls.At(i)
				r.esc(string(s.Value(r.src)))
			}
			if fenced {
				r.b.WriteString("```")
			}
			r.b.WriteString("\n\n")
		case *ast.Blockquote:
			if r.quoted || r.depth >= maxNesting {
				r.block(c)
				continue
			}
			inner := r.nested(c, true)
			r.b.WriteString("> " + strings.ReplaceAll(inner, "\n", "\n> ") + "\n\n")
		case *ast.List:
			k := c.Start
			for item := c.FirstChild(); item != nil; item = item.NextSibling() {
				mark := "• "
				if c.IsOrdered() {
					mark = strconv.Itoa(k) + ". "
					k++
				}
				if r.depth >= maxNesting {
					r.b.WriteString(mark)
					r.block(item)
					continue
				}
				body := strings.ReplaceAll(r.nested(item, false), "\n\n", "\n")
				r.b.WriteString(mark + strings.ReplaceAll(body, "\n", "\n   ") + "\n")
			}
			r.b.WriteString("\n")
		default:
			r.block(c)
		}
	}
}

// nested renders a block node (a quote, a list item) on its own.
func (r *slackRenderer) nested(n ast.Node, quote bool) string {
	inner := slackRenderer{src: r.src, depth: r.depth + 1, quoted: r.quoted || quote}
	inner.block(n)
	return strings.TrimSpace(inner.b.String())
}

// wrapped renders n's inline children between the mark m.
func (r *slackRenderer) wrapped(m string, n ast.Node) {
	r.b.WriteString(m)
	r.inline(n)
	r.b.WriteString(m)
}

func (r *slackRenderer) inline(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			r.esc(string(c.Value(r.src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				r.b.WriteString("\n")
			}
		case *ast.String:
			r.esc(string(c.Value))
		case *ast.CodeSpan:
			r.wrapped("`", c)
		case *ast.Emphasis:
			m := "_"
			if c.Level >= 2 {
				m = "*"
			}
			r.wrapped(m, c)
		case *extast.Strikethrough:
			r.wrapped("~", c)
		case *ast.Link:
			r.link(string(c.Destination), c, "")
		case *ast.AutoLink:
			u := string(c.URL(r.src))
			if c.AutoLinkType == ast.AutoLinkEmail {
				u = "mailto:" + u
			}
			r.link(u, c, string(c.Label(r.src)))
		case *ast.Image:
			var alt strings.Builder
			for t := c.FirstChild(); t != nil; t = t.NextSibling() {
				if tx, ok := t.(*ast.Text); ok {
					alt.Write(tx.Value(r.src))
				}
			}
			name := imageName(alt.String())
			if u, err := url.Parse(string(c.Destination)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
				r.b.WriteString("<" + slackURL(u) + "|" + slackEscape.Replace(strings.ReplaceAll(name, "|", "¦")) + ">")
				continue
			}
			r.esc(name)
		case *ast.RawHTML:
			for i := range c.Segments.Len() {
				s := c.Segments.At(i)
				r.esc(string(s.Value(r.src)))
			}
		default:
			r.inline(c)
		}
	}
}

// link writes an http(s) or mailto link as <url|text>; any other kind is
// its text.
func (r *slackRenderer) link(dest string, n ast.Node, label string) {
	u, err := url.Parse(dest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "mailto") {
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
	inner := slackRenderer{src: r.src}
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
