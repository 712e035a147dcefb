package channel

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// A question's markdown in a chat's own markup (a dialect: Telegram's
// HTML, tgformat.go; Slack's mrkdwn, slackformat.go). Both have bold,
// italic, strikethrough, code, preformatted blocks, links and quotes,
// and nothing else: headings become bold lines, lists bullets.

var mdParser = goldmark.New(goldmark.WithExtensions(extension.Strikethrough)).Parser()

// maxNesting bounds the quotes and lists rendered inside one another:
// each renders what it holds on its own, so that a text of "> > > …"
// or "- > - > …" would cost the square of its length; deeper ones
// are shown flat.
const maxNesting = 8

// A dialect is a chat's markup.
type dialect interface {
	// esc is s as text.
	esc(s string) string
	// marks are what the inline text of a heading, an emphasis or a
	// strikethrough is written between.
	marks(n ast.Node) (open, close string)
	codeSpan(r *mdRenderer, c *ast.CodeSpan)
	// codeBlock writes a fenced or indented code block, or an HTML
	// block.
	codeBlock(r *mdRenderer, c ast.Node)
	// quote is a quote's rendered inner text, quoted.
	quote(inner string) string
	// link writes a link to dest, of text n (label: an autolink's).
	link(r *mdRenderer, dest string, n ast.Node, label string)
	image(r *mdRenderer, img *ast.Image)
}

// render renders md in the dialect d.
func render(d dialect, md string) string {
	src := []byte(md)
	r := &mdRenderer{d: d, src: src}
	r.block(mdParser.Parse(text.NewReader(src)))
	return strings.TrimSpace(r.b.String())
}

type mdRenderer struct {
	d   dialect
	src []byte
	b   strings.Builder
	// depth counts the quotes and list items n is inside; quoted, in a
	// quote (neither chat nests one).
	depth  int
	quoted bool
}

func (r *mdRenderer) esc(s string) { r.b.WriteString(r.d.esc(s)) }

// block renders a block node's children, each ending in a blank line.
func (r *mdRenderer) block(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Heading:
			r.wrapped(c)
			r.b.WriteString("\n\n")
		case *ast.Paragraph, *ast.TextBlock:
			r.inline(c)
			r.b.WriteString("\n\n")
		case *ast.ThematicBreak:
			r.b.WriteString("———\n\n")
		case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
			r.d.codeBlock(r, c)
		case *ast.Blockquote:
			if r.quoted || r.depth >= maxNesting {
				r.block(c)
				continue
			}
			r.b.WriteString(r.d.quote(r.nested(c, true)) + "\n\n")
		case *ast.List:
			r.list(c)
		default:
			r.block(c)
		}
	}
}

// lines writes a code or HTML block's lines (or raw HTML's segments),
// escaped.
func (r *mdRenderer) lines(ls *text.Segments) {
	for i := range ls.Len() {
		s := ls.At(i)
		r.esc(string(s.Value(r.src)))
	}
}

// nested renders a block node (a quote, a list item) on its own.
func (r *mdRenderer) nested(n ast.Node, quote bool) string {
	inner := mdRenderer{d: r.d, src: r.src, depth: r.depth + 1, quoted: r.quoted || quote}
	inner.block(n)
	return strings.TrimSpace(inner.b.String())
}

// wrapped renders n's inline children between its marks.
func (r *mdRenderer) wrapped(n ast.Node) {
	open, closing := r.d.marks(n)
	r.b.WriteString(open)
	r.inline(n)
	r.b.WriteString(closing)
}

func (r *mdRenderer) list(l *ast.List) {
	n := l.Start
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		mark := "• "
		if l.IsOrdered() {
			mark = strconv.Itoa(n) + ". "
			n++
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
}

// inline renders a node's inline children.
func (r *mdRenderer) inline(n ast.Node) {
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
			r.d.codeSpan(r, c)
		case *ast.Emphasis, *extast.Strikethrough:
			r.wrapped(c)
		case *ast.Link:
			r.d.link(r, string(c.Destination), c, "")
		case *ast.AutoLink:
			u := string(c.URL(r.src))
			if c.AutoLinkType == ast.AutoLinkEmail {
				u = "mailto:" + u
			}
			if _, ok := linkable(u); !ok {
				// Not linked: its text, which it has no node of.
				r.esc(string(c.Label(r.src)))
				continue
			}
			r.d.link(r, u, c, string(c.Label(r.src)))
		case *ast.Image:
			r.d.image(r, c)
		case *ast.RawHTML:
			r.lines(c.Segments)
		default:
			r.inline(c)
		}
	}
}

// linkable is dest as an address a message links: http(s) or mailto;
// a link to any other is shown as its text.
func linkable(dest string) (*url.URL, bool) {
	u, err := url.Parse(dest)
	return u, err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "mailto")
}

// childText is the text of n's Text children (an image's alt text, a code
// span's code).
func childText(n ast.Node, src []byte) string {
	var b strings.Builder
	for t := n.FirstChild(); t != nil; t = t.NextSibling() {
		if tx, ok := t.(*ast.Text); ok {
			b.Write(tx.Value(src))
		}
	}
	return b.String()
}
