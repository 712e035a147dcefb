package channel

import (
	"cmp"
	"encoding/base64"
	"html"
	"net/url"
	"strings"
	"unicode/utf16"

	"github.com/yuin/goldmark/ast"
)

// A question's markdown in Telegram: the Bot API's HTML (parse_mode
// HTML), rendered by markup.go. Images given as data: URLs go as photos of their own;
// any other image is a link, never fetched by the server.

// photo is an image of a question, to be sent as a Telegram photo.
type photo struct {
	alt  string
	mime string
	data []byte
}

// maxPhotos bounds the photos of one question (a media group holds 10).
const maxPhotos = 10

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
	d := &tgHTML{}
	return render(d, md), d.photos
}

// tgHTML is Telegram's HTML (parse_mode HTML), and the photos taken
// out of what it renders.
type tgHTML struct{ photos []photo }

func (*tgHTML) esc(s string) string { return html.EscapeString(s) }

func (*tgHTML) marks(n ast.Node) (string, string) {
	tag := "s"
	switch n := n.(type) {
	case *ast.Heading:
		tag = "b"
	case *ast.Emphasis:
		tag = "i"
		if n.Level >= 2 {
			tag = "b"
		}
	}
	return "<" + tag + ">", "</" + tag + ">"
}

func (*tgHTML) codeSpan(r *mdRenderer, c *ast.CodeSpan) {
	r.b.WriteString("<code>")
	r.esc(childText(c, r.src))
	r.b.WriteString("</code>")
}

func (*tgHTML) codeBlock(r *mdRenderer, c ast.Node) {
	if c.Kind() == ast.KindHTMLBlock {
		r.lines(c.Lines())
		r.b.WriteString("\n")
		return
	}
	if fc, ok := c.(*ast.FencedCodeBlock); ok && len(fc.Language(r.src)) > 0 {
		r.b.WriteString(`<pre><code class="language-` + html.EscapeString(string(fc.Language(r.src))) + `">`)
	} else {
		r.b.WriteString("<pre><code>")
	}
	r.lines(c.Lines())
	r.b.WriteString("</code></pre>\n\n")
}

func (*tgHTML) quote(inner string) string { return "<blockquote>" + inner + "</blockquote>" }

// link writes an http(s) or mailto link; any other kind is its text.
func (*tgHTML) link(r *mdRenderer, dest string, n ast.Node, _ string) {
	u, ok := linkable(dest)
	if !ok {
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
func (d *tgHTML) image(r *mdRenderer, img *ast.Image) {
	alt := childText(img, r.src)
	dest := string(img.Destination)
	if p, ok := dataPhoto(alt, dest); ok && len(d.photos) < maxPhotos {
		d.photos = append(d.photos, p)
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
