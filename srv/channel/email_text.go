package channel

import (
	"bytes"
	"io"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // replies in any charset
	"golang.org/x/net/html"
)

// replyText is the answer a mail holds: its first text/plain part's
// lines above the quote, or its HTML's when it has no plain text (some
// mail programs send only HTML).
func replyText(raw []byte) string {
	ent, err := message.Read(bytes.NewReader(raw))
	if err != nil && !unknownCoding(err) {
		return ""
	}
	text, markup, _ := firstText(ent, 0)
	if text == "" && markup != "" {
		text = htmlText(markup)
	}
	return Clip(stripQuote(text), maxAnswer)
}

// maxDepth bounds the nesting of a mail's multiparts looked into.
const maxDepth = 8

// firstText is the body of e's first inline text/plain part (ok), or
// else of its first text/html part, looking into its multiparts
// (go-message's mail.Reader gives up on a part whose transfer encoding
// it does not know: this reads it as it is).
func firstText(e *message.Entity, depth int) (text, markup string, ok bool) {
	if mr := e.MultipartReader(); mr != nil {
		if depth >= maxDepth {
			return "", "", false
		}
		for {
			p, err := mr.NextPart()
			if err != nil && !unknownCoding(err) {
				return "", markup, false
			}
			t, h, ok := firstText(p, depth+1)
			if ok {
				return t, "", true
			}
			if markup == "" {
				markup = h
			}
		}
	}
	t, _, _ := e.Header.ContentType()
	if disp, _, _ := e.Header.ContentDisposition(); disp == "attachment" || t != "text/plain" && t != "text/html" {
		return "", "", false
	}
	b, _ := io.ReadAll(io.LimitReader(e.Body, maxReplySize))
	if t == "text/html" {
		return "", string(b), false
	}
	return string(b), "", true
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
