package channel

import (
	"bytes"
	"html"
	"io"
	"slices"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // replies in any charset
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

// htmlQuote marks where a mail program's HTML reply quotes the mail it
// answers (Gmail, Apple Mail and Thunderbird, Outlook).
var htmlQuote = []string{`<blockquote`, `class="gmail_quote`, `id="divRplyFwdMsg"`, `id="appendonsend"`, `class="moz-cite-prefix"`}

// htmlDropped are the elements whose content is no text.
var htmlDropped = []string{"head", "style", "script", "title"}

// htmlBreaks are the tags that end a line.
var htmlBreaks = map[string]bool{"br": true, "/p": true, "/div": true, "/li": true, "/tr": true, "/h1": true, "/h2": true, "/h3": true, "p": true, "div": true, "hr": true}

// htmlText is what a person wrote in an HTML-only reply, above the quote:
// the tags dropped, the entities read, a line for each paragraph, div or
// break. It is no HTML parser, and needs none: its output is plain text
// shown as such.
func htmlText(s string) string {
	lower := asciiLower(s)
	for _, q := range htmlQuote {
		if i := strings.Index(lower, q); i >= 0 {
			if j := strings.LastIndexByte(lower[:i], '<'); j >= 0 {
				i = j
			}
			s, lower = s[:i], lower[:i]
		}
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s, lower = s[i:], lower[i:]
		end := strings.IndexByte(s, '>')
		if end < 0 {
			break
		}
		name := strings.FieldsFunc(lower[1:end], func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' })
		tag := ""
		if len(name) > 0 {
			tag = strings.TrimSuffix(name[0], "/")
		}
		s, lower = s[end+1:], lower[end+1:]
		if slices.Contains(htmlDropped, tag) {
			k := strings.Index(lower, "</"+tag)
			if k < 0 { // unclosed: the rest is its content (and each byte is looked at once)
				break
			}
			s, lower = s[k:], lower[k:]
			continue
		}
		if htmlBreaks[tag] {
			b.WriteByte('\n')
		}
	}
	lines := strings.Split(html.UnescapeString(b.String()), "\n")
	var out []string
	for _, l := range lines {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// asciiLower is s with its ASCII letters in lower case, byte for byte:
// what is found in it is found at the same place in s (strings.ToLower
// changes the length of some letters, İ or K, and of bytes not UTF-8).
// The tags and marks looked for are ASCII.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
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
