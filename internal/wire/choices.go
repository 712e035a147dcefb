package wire

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// Limits of the choices offered with a question or a task report: what
// fits as buttons on a phone and as a notification's actions.
const (
	MaxOptions          = 10
	MaxLabelBytes       = 80
	MaxDescriptionBytes = 600
	// MaxQuestions: the questions one request asks. The inbox offers one
	// set of choices; several are asked as text (Fold).
	MaxQuestions = 10
)

// CheckQuestions reports the first way qs breaks the limits above, naming
// the limit; nil when they are fine.
func CheckQuestions(qs []*pb.Question) error {
	if len(qs) > MaxQuestions {
		return fmt.Errorf("at most %d questions per request, got %d", MaxQuestions, len(qs))
	}
	for _, q := range qs {
		if err := CheckOptions(q.GetOptions()); err != nil {
			return err
		}
	}
	return nil
}

// CheckOptions checks one set of options: at most MaxOptions, labels of 1
// to MaxLabelBytes bytes, unique and one line each (see oneLine), each
// showing something and none shown as another is (shownLabel),
// descriptions of at most MaxDescriptionBytes bytes, all valid UTF-8.
func CheckOptions(opts []*pb.Option) error {
	if len(opts) > MaxOptions {
		return fmt.Errorf("too many options: %d, at most %d", len(opts), MaxOptions)
	}
	seen := make(map[string]bool, len(opts))
	looks := make(map[string]int, len(opts)) // a label as shown → its option's number
	for i, o := range opts {
		l := o.GetLabel()
		shown := shownLabel(l)
		switch {
		case l == "":
			return fmt.Errorf("option %d has an empty label (labels are 1 to %d bytes)", i+1, MaxLabelBytes)
		case len(l) > MaxLabelBytes:
			return fmt.Errorf("option %d's label is %d bytes, longer than the limit of %d bytes", i+1, len(l), MaxLabelBytes)
		case !utf8.ValidString(l) || !utf8.ValidString(o.GetDescription()):
			return fmt.Errorf("option %d is not valid UTF-8", i+1)
		case !oneLine(l):
			return fmt.Errorf("option %d's label is not one line of text: it has a line break, a control character or a bidirectional control", i+1)
		case seen[l]:
			return fmt.Errorf("option %d repeats the label %q (labels must be unique)", i+1, l)
		case shown == "":
			return fmt.Errorf("option %d's label %q shows nothing: it is only spaces or invisible characters", i+1, l)
		case looks[shown] > 0:
			return fmt.Errorf("option %d's label %q looks the same as option %d's, %q: labels must differ in what a person sees, not only in spaces or invisible characters", i+1, l, looks[shown], opts[looks[shown]-1].GetLabel())
		case len(o.GetDescription()) > MaxDescriptionBytes:
			return fmt.Errorf("option %d's description is %d bytes, longer than the limit of %d bytes", i+1, len(o.GetDescription()), MaxDescriptionBytes)
		}
		seen[l] = true
		looks[shown] = i + 1
	}
	return nil
}

// shownLabel is a label as a button shows it: in one canonical form
// (NFC: a letter and its accent as one character or two are drawn
// alike), without what is drawn as nothing (the default-ignorable
// characters: format characters such as zero-width spaces and joiners,
// soft hyphens and byte order marks; variation selectors; the combining
// grapheme joiner; the Hangul fillers), with the braille blank for the
// space it is drawn as, its spaces of any kind single and none around
// it, and the Cyrillic and Greek letters drawn as Latin ones written as
// those (lookalike). Two labels shown the same cannot be told apart on a
// button, nor typed back one rather than the other.
func shownLabel(l string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		switch {
		case unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
			return -1
		case r == '\u2800':
			return ' '
		}
		if l, ok := lookalike[r]; ok {
			return l
		}
		return r
	}, norm.NFC.String(l))), " ")
}

// lookalike is the Cyrillic and Greek letters that common fonts draw as
// a Latin letter, and that letter: a short list of what Unicode's
// confusables (UTS #39) names, for the scripts most often mixed with
// Latin to make a word read as another.
var lookalike = map[rune]rune{
	// Cyrillic
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P',
	'С': 'C', 'Т': 'T', 'Х': 'X', 'У': 'Y', 'І': 'I', 'Ј': 'J', 'Ѕ': 'S', 'Ԛ': 'Q', 'Ԝ': 'W',
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i',
	'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'һ': 'h', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l',
	// Greek
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M',
	'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'ο': 'o', 'ν': 'v', 'ρ': 'p',
}

// OptionsOf is the options of the first set of choices in qs, and whether
// several may be chosen and free text given besides; no options when qs
// offers none.
func OptionsOf(qs []*pb.Question) (opts []*pb.Option, multiple, custom bool) {
	if len(qs) == 0 {
		return nil, false, true
	}
	return qs[0].GetOptions(), qs[0].GetMultiple(), qs[0].GetCustom()
}

// Chosen splits an answer's texts into the labels of opts they name (in
// the order of opts) and the rest, the free text: a client answers with
// an option by sending its label as one text content. A person who types
// (an e-mail or chat reply, the older web UI) may write a label in
// another case or with spaces around it, or several labels separated by
// commas or lines: a text names the options it can only mean (named),
// else it is free text whole. The existing agentassistant's Flutter app,
// which shows the options itself, answers in a form of its own
// (appReply), read the same way.
func Chosen(opts []*pb.Option, texts []string) (chosen, free []string) {
	picked := make(map[string]bool, len(texts))
	for _, t := range texts {
		if ls := named(opts, t); ls != nil {
			for _, l := range ls {
				picked[l] = true
			}
		} else {
			free = append(free, t)
		}
	}
	for _, o := range opts {
		if picked[o.GetLabel()] {
			chosen = append(chosen, o.GetLabel())
		}
	}
	return chosen, free
}

// named is the labels of opts that t names: one label as it is, one
// label whatever its case and the spaces around it when no other label
// reads the same, or a list of such labels; nil when any part of t names
// no label.
func named(opts []*pb.Option, t string) []string {
	if l, ok := label(opts, t); ok {
		return []string{l}
	}
	t, app := appReply(t)
	var ls []string
	for part := range strings.FieldsFuncSeq(t, func(r rune) bool { return r == ',' || r == '\n' || r == ';' }) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		l, ok := label(opts, part)
		if !ok && app {
			l, ok = recommended(opts, part)
		}
		if !ok {
			return nil
		}
		ls = append(ls, l)
	}
	return ls
}

// appReply is the answer line of t when t is the reply of the existing
// agentassistant's Flutter app to a request's Questions, "Q: <header>"
// then "A: <labels and words, comma-separated>" (ask_question_widget.dart,
// _submitReply), and whether it is one.
func appReply(t string) (string, bool) {
	q, a, ok := strings.Cut(t, "\n")
	if !ok || !strings.HasPrefix(q, "Q: ") || !strings.HasPrefix(a, "A: ") || strings.Contains(a, "\n") {
		return t, false
	}
	return strings.TrimPrefix(a, "A: "), true
}

// recommendedMark is what that app takes out of a label before it sends
// it back, as its own pattern says.
var recommendedMark = regexp.MustCompile(`\s*\(Recommended\)`)

// recommended is the label of opts that t names once "(Recommended)" is
// taken out of each, as label matches: the only one.
func recommended(opts []*pb.Option, t string) (string, bool) {
	found, n := "", 0
	for _, o := range opts {
		l := recommendedMark.ReplaceAllString(o.GetLabel(), "")
		if l != o.GetLabel() && strings.EqualFold(strings.TrimSpace(l), strings.TrimSpace(t)) {
			found, n = o.GetLabel(), n+1
		}
	}
	return found, n == 1
}

// label is the label of opts that t names: the same, else the only one
// equal to it under case folding once both are trimmed.
func label(opts []*pb.Option, t string) (string, bool) {
	for _, o := range opts {
		if o.GetLabel() == t {
			return t, true
		}
	}
	found, n := "", 0
	for _, o := range opts {
		if strings.EqualFold(strings.TrimSpace(o.GetLabel()), strings.TrimSpace(t)) {
			found, n = o.GetLabel(), n+1
		}
	}
	return found, n == 1
}

// CheckAnswer reports how an answer's contents break the choices qs
// offer, nil when they do not: without custom, only the options' labels,
// at least one; without multiple, at most one label. A label is a text
// content equal to it; empty texts count for nothing. Without options
// anything goes.
func CheckAnswer(qs []*pb.Question, contents []*pb.McpResultContent) error {
	opts, multiple, custom := OptionsOf(qs)
	if len(opts) == 0 {
		return nil
	}
	var texts []string
	other := 0
	for _, c := range contents {
		switch {
		case c.GetText() != nil || c.GetType() == 1:
			if t := c.GetText().GetText(); t != "" {
				texts = append(texts, t)
			}
		default:
			other++
		}
	}
	chosen, free := Chosen(opts, texts)
	switch {
	case !custom && (len(free) > 0 || other > 0):
		return fmt.Errorf("this question takes only its options (%s), not a typed answer or an attachment", labels(opts))
	case !custom && len(chosen) == 0:
		return fmt.Errorf("this question takes one of its options (%s)", labels(opts))
	case !multiple && len(chosen) > 1:
		return fmt.Errorf("this question takes one of its options, not %d", len(chosen))
	}
	return nil
}

// labels lists the labels of opts, quoted.
func labels(opts []*pb.Option) string {
	q := make([]string, len(opts))
	for i, o := range opts {
		q[i] = fmt.Sprintf("%q", o.GetLabel())
	}
	return strings.Join(q, ", ")
}

// OptionsText is the options of qs as text to follow a request's own, for
// a reader that does not show them (upstream's web UI and Flutter app,
// which know nothing of a request's Questions): a heading, a line per
// option with its description, and whether words of one's own do; ""
// when qs offers none. Each option is one line under the one heading
// written here: a label or description that would break the line (or
// turn it around) is written as one line (OneLine), so no option reads
// as two, nor as that heading.
func OptionsText(qs []*pb.Question) string {
	opts, multiple, custom := OptionsOf(qs)
	if len(opts) == 0 {
		return ""
	}
	var b strings.Builder
	if multiple {
		b.WriteString("\n\nAnswer with one or more of:")
	} else {
		b.WriteString("\n\nAnswer with one of:")
	}
	for _, o := range opts {
		l := OneLine(o.GetLabel())
		if l == "" {
			continue // nothing a person could type back
		}
		b.WriteString("\n- " + l)
		if d := OneLine(o.GetDescription()); d != "" {
			b.WriteString(" (" + d + ")")
		}
	}
	if custom {
		b.WriteString("\n\nOr answer in your own words.")
	}
	return b.String()
}

// Fold is a request of several Questions as one the inbox can show: the
// existing agentassistant's MCP server asks a list of them, each with
// its header and options, and puts the first one's text in the request's
// own. The inbox offers one set of choices, so the text becomes every
// question with its header and options, and there are no choices left
// to tap: the person answers them all in words. One question or none:
// text and qs unchanged. qs has passed CheckQuestions, so each label and
// description is one line.
func Fold(text string, qs []*pb.Question) (string, []*pb.Question) {
	if len(qs) <= 1 {
		return text, qs
	}
	var b strings.Builder
	if t := strings.TrimSpace(text); t != "" && t != strings.TrimSpace(qs[0].GetQuestion()) {
		b.WriteString(text + "\n\n")
	}
	for i, q := range qs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "%d. ", i+1)
		if h := OneLine(q.GetHeader()); h != "" {
			b.WriteString(h + ": ")
		}
		b.WriteString(strings.TrimSpace(q.GetQuestion()))
		if len(q.GetOptions()) == 0 {
			continue
		}
		if q.GetMultiple() {
			b.WriteString("\n   One or more of:")
		} else {
			b.WriteString("\n   One of:")
		}
		for _, o := range q.GetOptions() {
			b.WriteString("\n   - " + OneLine(o.GetLabel()))
			if d := OneLine(o.GetDescription()); d != "" {
				b.WriteString(" (" + d + ")")
			}
		}
	}
	b.WriteString("\n\nAnswer each question in your own words.")
	return b.String(), nil
}
