package channel

import (
	"cmp"
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"golang.org/x/text/unicode/bidi"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// What the channels say, in the same words.

// Asker names who asks req, as the inbox does: the agent's name, else
// its MCP client's, else "Your agent". The agent names itself: one line
// as written, not a line turned around by a bidirectional control, nor
// two.
func Asker(req hub.Request) string {
	return cmp.Or(agentOf(req), "Your agent")
}

// agentOf is the name req's agent goes by, "" when neither it nor its
// MCP client gave one.
func agentOf(req hub.Request) string {
	return cmp.Or(wire.OneLine(req.AgentName), wire.OneLine(req.McpClientName))
}

// title is a notice's first line: the project and who asks.
func title(n Notice) string {
	req := n.Request
	who := Isolated(Asker(req))
	var t string
	switch n.Kind {
	case hub.Asked:
		t = who + " asks"
		switch {
		case n.Test: // -check-channels' message, which asks nothing
			t = who + " sends a test"
		case req.Kind != wire.AskQuestion:
			t = who + " reports"
		}
	case hub.Answered:
		t = "Answered"
		if nick := wire.OneLine(nickname(n.Reply)); nick != "" {
			t = "Answered on " + Isolated(nick)
		}
		if chosen := answeredWith(n); len(chosen) > 0 {
			t += ": " + Isolated(strings.Join(chosen, ", "))
		}
	case hub.TimedOut:
		t = "Timed out"
	case settledUnknown:
		t = "No longer pending"
	default:
		t = "Withdrawn"
	}
	if p := Project(req.ProjectDirectory); p != "" {
		t = Isolated(p) + " · " + t
	}
	return Clip(t, maxTitle)
}

// answeredWith is what n's answer chose among what its question's
// messages offered, its options or the quick replies (Chosen), or, made
// from its note after a restart, what the note says it chose.
func answeredWith(n Notice) []string {
	if n.chose != nil {
		return n.chose
	}
	return Chosen(n.Request, n.Reply, quickReplies)
}

// Chosen is what r chose among what req offered, its options, or, for
// a question of none, one of replies (the quick replies its message
// showed as buttons), so that a message settled says which; nil when
// the answer holds anything else (the person's own words, an image),
// which is never repeated there: a chat or an ntfy topic may be read by
// others than the person, a lock screen by whoever holds the phone.
func Chosen(req hub.Request, r *hub.Reply, replies []string) []string {
	if r == nil || len(r.Contents) == 0 {
		return nil
	}
	texts := make([]string, 0, len(r.Contents))
	for _, c := range r.Contents {
		if c.GetText() == nil {
			return nil
		}
		texts = append(texts, c.GetText().GetText())
	}
	opts, _, _ := wire.OptionsOf(req.Questions)
	if len(opts) == 0 {
		if len(texts) == 1 && slices.Contains(replies, texts[0]) {
			return texts
		}
		return nil
	}
	chosen, free := wire.Chosen(opts, texts)
	if len(free) > 0 {
		return nil
	}
	return chosen
}

// headline is a question in one line: its title and its first words,
// where one line tells it (a mail's subject, a Slack notification).
func headline(n Notice) string {
	s := Clip(title(n), 500)
	if first := wire.OneLine(Plain(n.Request.Text)); first != "" {
		s += ": " + Isolated(Clip(first, 80))
	}
	return s
}

// maxTitle bounds a title, in bytes.
const maxTitle = 200

// nickname is the name of the device that answered, "" when none.
func nickname(r *hub.Reply) string {
	if r == nil {
		return ""
	}
	return r.Nickname
}

// shownName is how a person reads a channel's name ("Answered on
// Telegram").
func shownName(name string) string {
	if s, ok := shownNames[name]; ok {
		return s
	}
	return name // ntfy writes itself so
}

var shownNames = map[string]string{"telegram": "Telegram", "slack": "Slack", "email": "E-mail", "webhook": "Webhook"}

// redact keeps secrets out of an error: a server may repeat what it was
// given, a library's URLs may hold a token.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	for _, p := range secrets {
		if p != "" {
			s = strings.ReplaceAll(s, p, "***")
		}
	}
	if s == err.Error() {
		return err
	}
	// A network error, which names a host and no secret, stays in the
	// chain: what cannot be reached is told by name.
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return redacted{s, dns}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return redacted{s, op}
	}
	return errors.New(s)
}

// redacted is an error's words with its secrets taken out, wrapping only
// the network error it holds.
type redacted struct {
	msg string
	net error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.net }

// Isolated is s set apart (FSI…PDI) from the words around it when it
// holds a right-to-left letter: an Arabic name in an English line reads
// as written, and the line is not set right to left by its first letter.
// Anything else is left as it is.
func Isolated(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool {
		p, _ := bidi.LookupRune(r)
		return p.Class() == bidi.R || p.Class() == bidi.AL
	}) {
		return s
	}
	return "\u2068" + s + "\u2069"
}

// Project is the last element of a project directory: what a person
// calls it.
func Project(dir string) string {
	dir = strings.TrimRight(strings.ReplaceAll(wire.OneLine(dir), "\\", "/"), "/")
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		dir = dir[i+1:]
	}
	return Clip(dir, 60)
}

// Clip cuts s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:graphemeCut(s, i)] + "…"
}

// graphemeCut is where to cut s at or before i, a rune boundary, so as
// not to split what a person sees as one character: a flag's two
// letters, a letter and its accents, emoji joined by U+200D, an emoji
// and its skin tone or variation. It is i when one character would take
// all of s[:i] (a letter under a thousand accents): that one is cut.
func graphemeCut(s string, i int) int {
	for j := i; j > 0 && j < len(s); {
		before, size := utf8.DecodeLastRuneInString(s[:j])
		next, _ := utf8.DecodeRuneInString(s[j:])
		if !joined(before, next) && (!regional(before) || !regional(next) || trailingRegional(s[:j])%2 != 1) {
			return j
		}
		j -= size
	}
	return i
}

// joined: the runes a and b are one character to a person, b extending
// a (an accent, a skin tone, a variation, a keycap, a tag) or U+200D
// joining them.
func joined(a, b rune) bool {
	return a == '\u200d' || b == '\u200d' || unicode.In(b, unicode.Mn, unicode.Me, unicode.Mc) ||
		b >= 0xfe00 && b <= 0xfe0f || b >= 0x1f3fb && b <= 0x1f3ff || b >= 0xe0020 && b <= 0xe007f || b == 0x20e3
}

// regional: r is a regional indicator, half of a flag.
func regional(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// trailingRegional counts the regional indicators s ends with.
func trailingRegional(s string) int {
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !regional(r) {
			break
		}
		n++
		s = s[:len(s)-size]
	}
	return n
}

// quickReplies are the buttons of a question with no options of its own.
var quickReplies = []string{"Yes", "No", "Go ahead"}

// buttonsOf is what a request's buttons say (and answer with): its
// options when it offers some (own), else the quick replies.
func buttonsOf(req hub.Request) (labels []string, own bool) {
	opts, _, _ := wire.OptionsOf(req.Questions)
	if len(opts) == 0 {
		return quickReplies, false
	}
	labels = make([]string, len(opts))
	for i, o := range opts {
		labels[i] = o.GetLabel()
	}
	return labels, true
}

// shownOption is an option as a person reads it: its label, and its
// description on one line ("" when it has none).
type shownOption struct{ label, desc string }

// line is the option on one line: "Canary — Send 5% of the traffic…".
func (o shownOption) line() string {
	if o.desc == "" {
		return o.label
	}
	return o.label + " — " + o.desc
}

// maxShownDescription bounds an option's description in a message: ten
// of them whole (wire.MaxDescriptionBytes each) would take a message's
// room from its question; the app shows them whole.
const maxShownDescription = 200

// described is a request's options as a person reads them; some says
// whether one has a description (else its buttons say all there is).
func described(req hub.Request) (opts []shownOption, some bool) {
	given, _, _ := wire.OptionsOf(req.Questions)
	for _, o := range given {
		d := Clip(strings.Join(strings.Fields(o.GetDescription()), " "), maxShownDescription)
		opts = append(opts, shownOption{o.GetLabel(), d})
		some = some || d != ""
	}
	return opts, some
}

// cutOnButton says some option's label is longer than shows (counted
// in bytes, never more than its characters) on its button: a phone cuts
// it there, and two cut alike would read the same, so the options are
// listed whole too. A Telegram button, one to a row, shows about
// maxShownButton characters on a phone; an ntfy one, three to a row,
// about maxShownNtfyButton.
func cutOnButton(opts []shownOption, shows int) bool {
	return slices.ContainsFunc(opts, func(o shownOption) bool { return len(o.label) > shows })
}

const (
	maxShownButton     = 32
	maxShownNtfyButton = 20
)

// restInApp ends a question cut to fit a message.
const restInApp = "The rest is in the app."

// appLink opens the app on n's question, "" without public_url (the
// app's address as the person's phone reaches it is then unknown).
func appLink(n Notice) string {
	if n.AppURL == "" {
		return ""
	}
	return n.AppURL + "?request=" + url.QueryEscape(n.Request.ID)
}

// clipText cuts a question's text s to at most n bytes where a reader
// expects a break (clipHead). An agent often asks last, after its
// reasons: a last paragraph of at most a quarter of n is kept after the
// cut, behind the mark saying the rest is in the app, so that a
// message's buttons never answer a question it does not show; unless it
// is code (fenced or indented), or the cut falls inside code. cut says
// whether the caller is to mark the end as cut, after its own rendering.
func clipText(s string, n int) (clipped string, cut bool) {
	whole := strings.TrimRight(s, " \t\r\n")
	if len(whole) <= n {
		return clipHead(s, n) // nothing to keep: no cut, or no room at all
	}
	const mid = "\n\n…\n\n(" + restInApp + ")\n\n"
	if i := strings.LastIndex(whole, "\n\n"); i > 0 {
		last := strings.TrimLeft(whole[i:], "\r\n")
		indented := strings.HasPrefix(last, "    ") || strings.HasPrefix(last, "\t") // code, or a list's: out of place after the mark
		last = strings.TrimSpace(last)
		if len(last) <= n/4 && !indented && !strings.Contains(last, "```") && !strings.Contains(last, "~~~") {
			head, _ := clipHead(whole[:i], n-len(mid)-len(last))
			if head != "" && strings.Count(head, "```")%2 == 0 && strings.Count(head, "~~~")%2 == 0 {
				return head + mid + last, false
			}
		}
	}
	return clipHead(s, n)
}

// Cut is md cut to at most n bytes as a channel's message cuts it
// (clipText), its data: images named, its end marked "…" when cut there:
// for a text made plain afterwards (a push's).
func Cut(md string, n int) string {
	s, cut := clipText(withoutDataImages(md), n-len("…"))
	if cut {
		s += "…"
	}
	return s
}

// clipHead cuts s to at most n bytes at the last line's end, else the
// last space, in the last quarter of what fits; else on a rune boundary.
func clipHead(s string, n int) (clipped string, cut bool) {
	if len(s) <= n {
		return s, false
	}
	if n <= 0 { // no room left (what goes with the text took it all)
		return "", s != ""
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	s = s[:graphemeCut(s, i)]
	if i := strings.LastIndexByte(s, '\n'); i >= n*3/4 {
		s = s[:i]
	} else if i := strings.LastIndexByte(s, ' '); i >= n*3/4 {
		s = s[:i]
	}
	return strings.TrimRight(s, " \t\r\n"), true
}

// hostLike is what reads as a domain in a link's text.
var hostLike = regexp.MustCompile(`(?:[\p{L}\p{N}-]+\.)+\p{L}{2,}`)

// spoofs says whether a link's text names a place other than where the
// link goes: text reading as an address or a domain (once the
// invisible characters an agent may hide in it are gone) of another
// host than dest's. Such a link is shown with where it goes.
func spoofs(text string, dest *url.URL) bool {
	text = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, text)
	host := dest.Hostname()
	if dest.Scheme == "mailto" {
		_, host, _ = strings.Cut(dest.Opaque, "@")
		host, _, _ = strings.Cut(host, "?")
	}
	for _, m := range hostLike.FindAllString(text, -1) {
		if !strings.EqualFold(m, host) {
			return true
		}
	}
	return false
}

// linkText is the text a link (or any inline node) shows.
func linkText(n ast.Node, src []byte) string {
	var b strings.Builder
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Value(src))
			case *ast.String:
				b.Write(c.Value)
			case *ast.AutoLink:
				b.Write(c.Label(src))
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}
