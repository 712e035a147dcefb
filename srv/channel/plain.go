package channel

import (
	"regexp"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// What a question's markdown says where no markdown is shown: a
// notification's lines, a plain-text mail, a chat that would print the
// marks. An image that travels inside the text (a data: URL, the only
// kind the inbox shows) is kilobytes of base64 to a reader: it is named
// instead, and left to the app.

// dataImage is an image given as a data: URL (base64 holds no ")").
var dataImage = regexp.MustCompile(`!\[([^\]\n]*)\]\(\s*<?data:[^)]*\)`)

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
	return dataImage.ReplaceAllStringFunc(md, func(m string) string {
		return imageName(dataImage.FindStringSubmatch(m)[1])
	})
}

// maxPlainInput bounds the markdown read for Plain: its text is for a
// line or two, and a request's text may be long.
const maxPlainInput = 16 << 10

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
				var alt strings.Builder
				for t := c.FirstChild(); t != nil; t = t.NextSibling() {
					if tx, ok := t.(*ast.Text); ok {
						alt.Write(tx.Value(src))
					}
				}
				b.WriteString(imageName(alt.String()))
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
