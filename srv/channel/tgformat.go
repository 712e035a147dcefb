package channel

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"html"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// A question's markdown in Telegram: the Bot API's HTML (parse_mode
// HTML) has bold, italic, strikethrough, code, preformatted blocks,
// links and quotes, and nothing else; headings become bold lines and
// lists bullets. Images given as data: URLs go as photos of their own;
// any other image is a link, never fetched by the server.

// photo is an image of a question, to be sent as a Telegram photo.
type photo struct {
	alt  string
	mime string
	data []byte
}

// maxPhotos bounds the photos of one question (a media group holds 10).
const maxPhotos = 10

var mdParser = goldmark.New(goldmark.WithExtensions(extension.Strikethrough)).Parser()

// maxTelegramText bounds the markdown of a question rendered in its
// message: the message holds 4,096 characters, the title and buttons'
// hint besides.
const maxTelegramText = 3000

// maxTelegramMessage is what a message's text holds, in UTF-16 code
// units once its HTML is parsed (tgLen).
const maxTelegramMessage = 4096

// telegramQuestion renders a question's text md as its message's HTML,
// at most room characters as Telegram counts them (tgLen; cut says it
// was cut), and its data: images as photos. Those are taken out before
// the text is cut: an image is larger than the text a message holds,
// and one cut is no image. Rendering may lengthen the text (a nested
// list's indent): it is cut shorter until it fits.
func telegramQuestion(md string, room int) (body string, photos []photo, cut bool) {
	md = replaceDataImages(md, func(alt, dest string) string {
		if p, ok := dataPhoto(alt, strings.Trim(strings.TrimSpace(dest), "<>")); ok && len(photos) < maxPhotos {
			photos = append(photos, p)
			if alt == "" {
				return ""
			}
			return "[" + alt + "]"
		}
		return imageName(alt)
	})
	for n := min(maxTelegramText, room); n > 0; n = n * 2 / 3 {
		part, c := clipText(md, n)
		b, more := telegramHTML(part)
		if tgLen(b) <= room {
			return b, append(photos, more...), c
		}
	}
	return "", photos, md != ""
}

// tgLen is the length of a message's HTML as Telegram bounds it: in
// UTF-16 code units of its text, once tags and entities are parsed.
// The HTML is this package's, whose text has every < escaped.
func tgLen(h string) int {
	var b strings.Builder
	for {
		i := strings.IndexByte(h, '<')
		if i < 0 {
			b.WriteString(h)
			break
		}
		b.WriteString(h[:i])
		j := strings.IndexByte(h[i:], '>')
		if j < 0 {
			break
		}
		h = h[i+j+1:]
	}
	n := 0
	for _, r := range html.UnescapeString(b.String()) {
		n += utf16.RuneLen(r)
	}
	return n
}

// dataPhoto is the photo of a data: URL, if it is a base64 image.
func dataPhoto(alt, dest string) (photo, bool) {
	meta, data, ok := strings.Cut(dest, ",")
	if !ok || !strings.HasPrefix(meta, "data:image/") || !strings.HasSuffix(meta, ";base64") {
		return photo{}, false
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return photo{}, false
	}
	return photo{alt: alt, mime: strings.TrimSuffix(strings.TrimPrefix(meta, "data:"), ";base64"), data: b}, true
}

// telegramHTML renders md as Telegram's HTML, taking out its data: images.
func telegramHTML(md string) (string, []photo) {
	src := []byte(md)
	r := &tgRenderer{src: src}
	r.block(mdParser.Parse(text.NewReader(src)))
	return strings.TrimSpace(r.b.String()), r.photos
}

type tgRenderer struct {
	src    []byte
	b      strings.Builder
	photos []photo
	// depth counts the quotes and list items n is inside; quoted, in a
	// quote (Telegram nests none).
	depth  int
	quoted bool
}

// maxNesting bounds the quotes and lists rendered inside one another:
// each renders what it holds on its own, so that a text of "> > > …"
// or "- > - > …" would cost the square of its length; deeper ones
// are shown flat.
const maxNesting = 8

func (r *tgRenderer) esc(s string) { r.b.WriteString(html.EscapeString(s)) }

// block renders a block node's children, each ending in a blank line.
func (r *tgRenderer) block(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Heading:
			r.tagged("b", c)
			r.b.WriteString("\n\n")
		case *ast.Paragraph, *ast.TextBlock:
			r.inline(c)
			r.b.WriteString("\n\n")
		case *ast.ThematicBreak:
			r.b.WriteString("———\n\n")
		case *ast.FencedCodeBlock:
			if lang := string(c.Language(r.src)); lang != "" {
				r.b.WriteString(`<pre><code class="language-` + html.EscapeString(lang) + `">`)
			} else {
				r.b.WriteString("<pre><code>")
			}
			r.lines(c.Lines())
			r.b.WriteString("</code></pre>\n\n")
		case *ast.CodeBlock:
			r.b.WriteString("<pre><code>")
			r.lines(c.Lines())
			r.b.WriteString("</code></pre>\n\n")
		case *ast.HTMLBlock:
			r.lines(c.Lines())
			r.b.WriteString("\n")
		case *ast.Blockquote:
			if r.quoted || r.depth >= maxNesting {
				r.block(c)
				continue
			}
			r.b.WriteString("<blockquote>" + r.nested(c, true) + "</blockquote>\n\n")
		case *ast.List:
			r.list(c)
		default:
			r.block(c)
		}
	}
}

// lines writes a code or HTML block's lines (or raw HTML's segments),
// escaped.
func (r *tgRenderer) lines(ls *text.Segments) {
	for i := range ls.Len() {
		s := ls.At(i)
		r.esc(string(s.Value(r.src)))
	}
}

// nested renders a block node (a quote, a list item) on its own, its
// photos taken with the others.
func (r *tgRenderer) nested(n ast.Node, quote bool) string {
	inner := tgRenderer{src: r.src, depth: r.depth + 1, quoted: r.quoted || quote}
	inner.block(n)
	r.photos = append(r.photos, inner.photos...)
	return strings.TrimSpace(inner.b.String())
}

// tagged renders n's inline children inside the HTML element tag.
func (r *tgRenderer) tagged(tag string, n ast.Node) {
	r.b.WriteString("<" + tag + ">")
	r.inline(n)
	r.b.WriteString("</" + tag + ">")
}

// text is the text of n's Text children.
func (r *tgRenderer) text(n ast.Node) string {
	var b bytes.Buffer
	for t := n.FirstChild(); t != nil; t = t.NextSibling() {
		if tx, ok := t.(*ast.Text); ok {
			b.Write(tx.Value(r.src))
		}
	}
	return b.String()
}

func (r *tgRenderer) list(l *ast.List) {
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
func (r *tgRenderer) inline(n ast.Node) {
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
			r.b.WriteString("<code>")
			r.esc(r.text(c))
			r.b.WriteString("</code>")
		case *ast.Emphasis:
			tag := "i"
			if c.Level >= 2 {
				tag = "b"
			}
			r.tagged(tag, c)
		case *extast.Strikethrough:
			r.tagged("s", c)
		case *ast.Link:
			r.link(string(c.Destination), c)
		case *ast.AutoLink:
			u := string(c.URL(r.src))
			if c.AutoLinkType == ast.AutoLinkEmail {
				u = "mailto:" + u
			}
			r.link(u, c)
		case *ast.Image:
			r.image(c)
		case *ast.RawHTML:
			r.lines(c.Segments)
		default:
			r.inline(c)
		}
	}
}

// link writes an http(s) or mailto link; any other kind is its text.
func (r *tgRenderer) link(dest string, n ast.Node) {
	u, err := url.Parse(dest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "mailto") {
		r.inline(n)
		return
	}
	if spoofs(linkText(n, r.src), u) {
		// Its text names another place: shown as text, with the one
		// link where it goes.
		r.inline(n)
		r.b.WriteString(` (<a href="` + html.EscapeString(u.String()) + `">` + html.EscapeString(u.String()) + `</a>)`)
		return
	}
	r.b.WriteString(`<a href="` + html.EscapeString(u.String()) + `">`)
	if n.FirstChild() == nil {
		r.esc(dest)
	} else {
		r.inline(n)
	}
	r.b.WriteString("</a>")
}

// image takes a data: image out as a photo; any other is a link to it.
func (r *tgRenderer) image(img *ast.Image) {
	alt := r.text(img)
	dest := string(img.Destination)
	if p, ok := dataPhoto(alt, dest); ok && len(r.photos) < maxPhotos {
		r.photos = append(r.photos, p)
		if alt != "" {
			r.esc("[" + alt + "]")
		}
		return
	}
	label := cmp.Or(alt, "image")
	if u, err := url.Parse(dest); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		r.b.WriteString(`<a href="` + html.EscapeString(u.String()) + `">`)
		r.esc("[" + label + "]")
		r.b.WriteString("</a>")
		return
	}
	r.esc("[" + label + "]")
}
