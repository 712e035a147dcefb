package channel

import (
	"bytes"
	"io"
	"net/url"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // replies in any charset
	"golang.org/x/net/html"
)

// readMail is the answer a mail holds: its text (its first text/plain
// part's lines above the quote, or its HTML's when it has no plain
// text: some mail programs send only HTML) and the images attached to
// it (mailParts.images).
func readMail(raw []byte) (string, *replyImages) {
	var m mailParts
	ent, err := message.Read(bytes.NewReader(raw))
	if err == nil || unknownCoding(err) {
		m.walk(ent, 0)
	}
	return m.answer(), m.images()
}

// maxDepth bounds the nesting of a mail's multiparts looked into.
const maxDepth = 8

// mailParts are what a mail's parts hold: its first inline text/plain
// part (plain), or else its first text/html one (markup), and its files.
type mailParts struct {
	plain, markup string
	text          bool // plain was found
	files         []mailFile
}

// mailFile is a file a mail holds: its Content-ID and (the start of) its
// bytes, or, past maxMailFiles, whether it says it is an image (unread).
type mailFile struct {
	cid          string
	data         []byte
	unread, says bool
}

// walk reads e's parts, looking into its multiparts (go-message's
// mail.Reader gives up on a part whose transfer encoding it does not
// know: this reads it as it is). A part holding a mail (message/rfc822:
// the original, forwarded or quoted) is no file of the person's.
func (m *mailParts) walk(e *message.Entity, depth int) {
	if mr := e.MultipartReader(); mr != nil {
		for depth < maxDepth {
			p, err := mr.NextPart()
			if err != nil && !unknownCoding(err) {
				return
			}
			m.walk(p, depth+1)
		}
		return
	}
	t, _, _ := e.Header.ContentType()
	disp, _, _ := e.Header.ContentDisposition()
	switch {
	case strings.HasPrefix(t, "message/"):
	case disp != "attachment" && t == "text/plain":
		if !m.text {
			m.plain, m.text = readPart(e.Body, maxReplySize), true
		}
	case disp != "attachment" && t == "text/html":
		if m.markup == "" {
			m.markup = readPart(e.Body, maxReplySize)
		}
	case disp == "attachment" || !strings.HasPrefix(t, "text/"):
		f := mailFile{cid: contentID(e.Header.Get("Content-ID")), unread: len(m.files) >= maxMailFiles,
			says: strings.HasPrefix(t, "image/") || t == "application/octet-stream"}
		if !f.unread {
			f.data, _ = io.ReadAll(io.LimitReader(e.Body, maxReplyImageBytes+1))
		}
		m.files = append(m.files, f)
	}
}

// maxMailFiles bounds the files of a mail read; those past it are
// counted left out, as images when they say they are.
const maxMailFiles = 4 * maxReplyImages

func readPart(r io.Reader, n int64) string {
	b, _ := io.ReadAll(io.LimitReader(r, n))
	return string(b)
}

// contentID is a Content-ID header's ID, without its angle brackets.
func contentID(h string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h), "<"), ">")
}

// answer is the text the person wrote, above the quote.
func (m *mailParts) answer() string {
	text := m.plain
	if !m.text && m.markup != "" {
		text = htmlText(m.markup)
	}
	return Clip(stripQuote(text), maxAnswer)
}

// images are the mail's files that are images, within the bounds: a
// part its HTML shows (a cid: link, such as a signature's logo, or an
// image of the quoted mail) is none the person attached.
func (m *mailParts) images() *replyImages {
	shown := cidLinks(m.markup)
	var r replyImages
	for _, f := range m.files {
		switch {
		case f.cid != "" && shown[strings.ToLower(f.cid)]:
		case f.unread && f.says:
			r.over++
		case f.unread:
			r.files++
		default:
			r.add(f.data)
		}
	}
	return &r
}

// cidLinks are the Content-IDs the HTML markup links to (cid:…, RFC
// 2392), in lower case.
func cidLinks(markup string) map[string]bool {
	links := map[string]bool{}
	lower := strings.ToLower(markup)
	for {
		i := strings.Index(lower, "cid:")
		if i < 0 {
			return links
		}
		lower = lower[i+4:]
		end := strings.IndexAny(lower, "\"' >)\t\r\n")
		if end < 0 {
			end = len(lower)
		}
		id, err := url.PathUnescape(html.UnescapeString(lower[:end]))
		if err != nil {
			id = lower[:end]
		}
		links[id] = true
	}
}

// htmlDropped are the elements whose content is no text.
var htmlDropped = map[string]bool{"head": true, "style": true, "script": true, "title": true}

// htmlBreaks are the tags that end a line ("/p": an end tag).
var htmlBreaks = map[string]bool{"br": true, "/p": true, "/div": true, "/li": true, "/tr": true, "/h1": true, "/h2": true, "/h3": true, "p": true, "div": true, "hr": true}

// htmlQuotes reports whether a start tag begins the quote of the mail a
// reply answers: a blockquote, or the element each mail program puts
// before it (Gmail's gmail_quote, Thunderbird's moz-cite-prefix,
// Outlook's divRplyFwdMsg or appendonsend).
func htmlQuotes(tag string, z *html.Tokenizer, hasAttr bool) bool {
	if tag == "blockquote" {
		return true
	}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) { // the tokenizer gives names in lower case
		case "class":
			for _, c := range strings.Fields(string(v)) {
				if c == "gmail_quote" || c == "moz-cite-prefix" {
					return true
				}
			}
		case "id":
			if id := string(v); strings.EqualFold(id, "divRplyFwdMsg") || strings.EqualFold(id, "appendonsend") {
				return true
			}
		}
	}
	return false
}

// htmlText is what a person wrote in an HTML-only reply, above the quote:
// its text as golang.org/x/net/html's tokenizer reads it (entities read;
// comments, tags and what head, style, script and title hold dropped),
// a line for each paragraph, div or break.
func htmlText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	dropped := 0 // depth in elements whose content is no text
read:
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken: // the end, or text cut short
			break read
		case html.TextToken:
			if dropped == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			if tt == html.EndTagToken {
				if htmlDropped[tag] && dropped > 0 {
					dropped--
				}
				tag = "/" + tag
			} else if htmlQuotes(tag, z, hasAttr) {
				break read
			} else if htmlDropped[tag] && tt == html.StartTagToken {
				dropped++
			}
			if htmlBreaks[tag] {
				b.WriteByte('\n')
			}
		}
	}
	var out []string
	for l := range strings.SplitSeq(b.String(), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// unknownCoding: the error of a mail (or part) whose charset or transfer
// encoding go-message does not know; it still reads the bytes as they
// are, which beats losing what the person wrote.
func unknownCoding(err error) bool {
	return message.IsUnknownCharset(err) || message.IsUnknownEncoding(err)
}

// stripQuote keeps what was written above the quoted mail: it drops the
// lines quoted with ">", the "On … wrote:" line before them, an
// "Original Message" block and the signature after "-- ". A reply
// written below the quote keeps its own lines.
func stripQuote(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		t := strings.TrimRight(l, " \t")
		if l == "-- " || t == "--" || strings.HasPrefix(strings.TrimSpace(l), "-----Original Message-----") {
			lines = lines[:i]
			break
		}
	}
	above := lines
	for i, l := range lines {
		if strings.HasPrefix(l, ">") {
			above = lines[:i]
			break
		}
	}
	above = dropAttribution(above)
	if text := strings.TrimSpace(strings.Join(above, "\n")); text != "" {
		return text
	}
	var own []string // below the quote
	for _, l := range lines {
		if !strings.HasPrefix(l, ">") {
			own = append(own, l)
		}
	}
	own = dropAttribution(trimBlank(own))
	return strings.TrimSpace(strings.Join(own, "\n"))
}

// dropAttribution drops a trailing "On … wrote:" line (which a mail
// program may have wrapped over two).
func dropAttribution(lines []string) []string {
	lines = trimBlank(lines)
	n := len(lines)
	if n == 0 {
		return lines
	}
	last := strings.TrimSpace(lines[n-1])
	if !strings.HasSuffix(last, "wrote:") && (!strings.HasPrefix(last, "On ") || !strings.HasSuffix(last, ":")) {
		return lines
	}
	lines = lines[:n-1]
	if !strings.HasPrefix(last, "On ") && n >= 2 && strings.HasPrefix(strings.TrimSpace(lines[n-2]), "On ") {
		lines = lines[:n-2]
	}
	return trimBlank(lines)
}

// trimBlank drops the blank lines at the end.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
