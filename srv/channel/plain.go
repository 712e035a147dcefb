package channel

import (
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// What a question's markdown says where no markdown is shown: a
// notification's lines, a plain-text mail, a chat that would print the
// marks. An image that travels inside the text (a data: URL, the only
// kind the inbox shows) is kilobytes of base64 to a reader: it is named
// instead, and left to the app.

// replaceDataImages is md with each image given as a data: URL
// replaced by what f makes of its alt text and destination: each match
// of !\[([^\]\n]*)\]\(\s*<?data:[^)]*\) (base64 holds no ")"), leftmost
// first. It reads md once, at the speed of a byte search: an image is
// megabytes, and that regular expression took a second for ten.
func replaceDataImages(md string, f func(alt, dest string) string) string {
	var b strings.Builder
	done := 0 // md[:done] is written, or replaced
	// altEnd is the first "]" or line end at or after the alt text of
	// the "![" looked at, failed an alt end that matched no image, and
	// closing the first ")" at or after the destination: each found
	// once for all the "![" sharing it.
	altEnd, failed, closing := -1, -1, -1
	for i := 0; ; {
		j := strings.Index(md[i:], "![")
		if j < 0 {
			break
		}
		p := i + j
		i = p + 1
		if altEnd < p+2 {
			k := strings.IndexAny(md[p+2:], "]\n")
			if k < 0 {
				break // no later alt text ends either
			}
			altEnd = p + 2 + k
		}
		e := altEnd
		if e == failed {
			continue
		}
		q := e + 2
		if !strings.HasPrefix(md[e:], "](") {
			failed = e
			continue
		}
		for q < len(md) && strings.IndexByte("\t\n\f\r ", md[q]) >= 0 {
			q++
		}
		if q < len(md) && md[q] == '<' {
			q++
		}
		if !strings.HasPrefix(md[q:], "data:") {
			failed = e
			continue
		}
		if closing < q {
			k := strings.IndexByte(md[q:], ')')
			if k < 0 {
				break // no later image closes either
			}
			closing = q + k
		}
		b.WriteString(md[done:p])
		b.WriteString(f(md[p+2:e], md[e+2:closing]))
		done, i = closing+1, closing+1
	}
	if done == 0 {
		return md
	}
	b.WriteString(md[done:])
	return b.String()
}

// imageName is how an image is named where it cannot be shown.
func imageName(alt string) string {
	if alt = strings.TrimSpace(alt); alt != "" {
		return "[image: " + alt + "]"
	}
	return "[image]"
}

// withoutDataImages is md with each data: image named instead
// (imageName), the rest as written.
func withoutDataImages(md string) string {
	return replaceDataImages(md, func(alt, _ string) string { return imageName(alt) })
}

// maxPlainInput bounds the markdown read for Plain: its text is for a
// line or two (a push's 600 bytes, ntfy's 200), and a request's text
// may be long. Its parse of constructs nested as deep as the text is
// long costs the square of the bytes read: at 16 KiB, 0.1 to 0.4 s of
// CPU, for each push subscription.
const maxPlainInput = 4 << 10

// Plain is md as one paragraph of words: the marks of its emphasis,
// code, headings, lists and quotes dropped, a link as its text, an image
// named (imageName), whitespace made single spaces.
func Plain(md string) string {
	src := []byte(Clip(withoutDataImages(md), maxPlainInput))
	var b strings.Builder
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(c.Value)
			case *ast.Image:
				b.WriteString(imageName(childText(c, src)))
			case *ast.AutoLink:
				b.Write(c.Label(src))
			case *ast.RawHTML:
				for i := range c.Segments.Len() {
					seg := c.Segments.At(i)
					b.Write(seg.Value(src))
				}
			case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
				ls := c.Lines()
				for i := range ls.Len() {
					seg := ls.At(i)
					b.Write(seg.Value(src))
					b.WriteByte(' ')
				}
			default:
				walk(c)
			}
			if c.Type() == ast.TypeBlock {
				b.WriteByte(' ')
			}
		}
	}
	walk(mdParser.Parse(text.NewReader(src)))
	return strings.Join(strings.Fields(b.String()), " ")
}
