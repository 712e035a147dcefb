package channel

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// A question's markdown in ntfy. ntfy renders the markdown it is given
// (its web app, its Android app): a link there shows its text alone, an
// image is fetched as the notification is read. The agent's text often
// quotes what others wrote, so when it holds a link whose text names
// another place than where it goes ([bank.example](https://elsewhere)),
// a link to anything but an http(s) or mailto address, an image, or raw
// HTML, ntfy is given the text as plain lines instead, each link's
// address written out after its text, where ntfy shows it as it is. The
// options' lines, listed under the question, are read the same way.

// ntfyText is a question's text md for ntfy, cut to at most n bytes
// (clipText; cut says whether it was), to be followed by mark when cut
// and by the option lines listed. What is checked is the message as
// sent, mark and listed included (a link may be made of a part of the
// text whose end was cut, or of a definition in an option's line):
// when nothing in it disguises where it leads, md as it is (without
// its data: images) and markdown true; else md as plain lines, and
// markdown false.
func ntfyText(md, mark, listed string, n int) (out string, cut, markdown bool) {
	md = withoutDataImages(md)
	out, cut = clipText(md, n)
	sent := out
	if cut {
		sent += mark
	}
	if !ntfyDisguises(sent + listed) {
		return out, cut, true
	}
	// Only what may be shown is read: ntfy's message holds
	// ntfyMaxMessage bytes.
	out, cut = clipText(plainLines(Clip(md, ntfyMaxMessage)), n)
	return out, cut || len(md) > ntfyMaxMessage, false
}

// ntfyDisguises says whether md, rendered by ntfy, would show a link,
// an image or HTML whose look is not where it leads.
func ntfyDisguises(md string) bool {
	if md == "" {
		return false
	}
	src := []byte(md)
	found := false
	_ = ast.Walk(mdParser.Parse(text.NewReader(src)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Image, *ast.RawHTML, *ast.HTMLBlock:
			found = true
		case *ast.Link:
			u, err := url.Parse(string(n.Destination))
			found = err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "mailto") ||
				spoofs(linkText(n, src), u)
		case *ast.AutoLink:
			u, err := url.Parse(string(n.URL(src)))
			found = err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "mailto" && n.AutoLinkType != ast.AutoLinkEmail)
		}
		if found {
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return found
}

// plainLines is md as plain text that keeps its lines: headings,
// paragraphs, list items and quotes each on lines of their own, the
// marks of emphasis and code dropped, a link as its text followed by
// its address (when that is another), an image named (imageName) with
// its address, HTML as written.
func plainLines(md string) string {
	p := &plainRenderer{src: []byte(md)}
	p.block(mdParser.Parse(text.NewReader(p.src)), "")
	return strings.TrimSpace(p.b.String())
}

type plainRenderer struct {
	src []byte
	b   strings.Builder
}

// block writes n's blocks, a blank line between two, each line after
// the first started with indent (a list item's or a quote's).
func (p *plainRenderer) block(n ast.Node, indent string) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if prev := c.PreviousSibling(); prev != nil {
			p.line(indent)
			if prev.Kind() != ast.KindTextBlock {
				p.line(indent)
			}
		}
		switch c := c.(type) {
		case *ast.List:
			i := c.Start
			for it := c.FirstChild(); it != nil; it = it.NextSibling() {
				if it != c.FirstChild() {
					p.line(indent)
					if !c.IsTight {
						p.line(indent)
					}
				}
				mark := "- "
				if c.IsOrdered() {
					mark = strconv.Itoa(i) + ". "
					i++
				}
				p.b.WriteString(mark)
				p.block(it, indent+strings.Repeat(" ", len(mark)))
			}
		case *ast.Blockquote:
			p.b.WriteString("> ")
			p.block(c, indent+"> ")
		case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
			ls := c.Lines()
			for i := range ls.Len() {
				if i > 0 {
					p.line(indent)
				}
				seg := ls.At(i)
				p.b.WriteString(strings.TrimRight(string(seg.Value(p.src)), "\r\n"))
			}
		case *ast.ThematicBreak:
			p.b.WriteString("———")
		default:
			p.inline(c, indent)
		}
	}
}

// line ends a line; the next starts with indent.
func (p *plainRenderer) line(indent string) {
	p.b.WriteString("\n" + indent)
}

func (p *plainRenderer) inline(n ast.Node, indent string) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			p.b.Write(c.Value(p.src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				p.line(indent)
			}
		case *ast.String:
			p.b.Write(c.Value)
		case *ast.AutoLink:
			p.b.Write(c.URL(p.src))
		case *ast.RawHTML:
			for i := range c.Segments.Len() {
				seg := c.Segments.At(i)
				p.b.Write(seg.Value(p.src))
			}
		case *ast.Link:
			p.inline(c, indent)
			if dest := string(c.Destination); shownAddress(dest) && linkText(c, p.src) != dest {
				p.b.WriteString(" (" + dest + ")")
			}
		case *ast.Image:
			p.b.WriteString(imageName(linkText(c, p.src)))
			if dest := string(c.Destination); shownAddress(dest) {
				p.b.WriteString(" (" + dest + ")")
			}
		default: // emphasis, code, strikethrough: their text

			p.inline(c, indent)
		}
	}
}

// shownAddress says whether a link's address is worth writing out: one
// a person can open (http, https, mailto).
func shownAddress(dest string) bool {
	u, err := url.Parse(dest)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "mailto")
}
