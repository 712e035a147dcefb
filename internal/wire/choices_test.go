package wire_test

import (
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestChosen: texts naming an option's label are choices, told in the
// order offered; the others are free text, in the order given.
func TestChosen(t *testing.T) {
	opts := []*pb.Option{{Label: "A"}, {Label: "B"}, {Label: "C"}}
	chosen, free := wire.Chosen(opts, []string{"C", "why not", "A", "C"})
	if strings.Join(chosen, "|") != "A|C" || strings.Join(free, "|") != "why not" {
		t.Errorf("chosen %q, free %q", chosen, free)
	}
	if chosen, free := wire.Chosen(nil, []string{"A"}); chosen != nil || strings.Join(free, "|") != "A" {
		t.Errorf("without options: chosen %q, free %q", chosen, free)
	}
}

// TestChosenTyped: a person typing an option's label (an e-mail or chat
// reply, the older web UI, which has no buttons) writes it in another
// case, with spaces around it, or names several at once; each names the
// option it can only mean, and text that names none stays free.
func TestChosenTyped(t *testing.T) {
	opts := []*pb.Option{{Label: "SQLite"}, {Label: "Postgres"}, {Label: "Yes, go ahead"}, {Label: "x"}, {Label: "X"}}
	for _, c := range []struct{ text, chosen, free string }{
		{"sqlite", "SQLite", ""},
		{"  Postgres \n", "Postgres", ""},
		{"postgres, SQLite", "SQLite|Postgres", ""},
		{"SQLite\npostgres", "SQLite|Postgres", ""},
		{"yes, go ahead", "Yes, go ahead", ""},
		{"Postgres, but only on the server", "", "Postgres, but only on the server"},
		{"x", "x", ""},               // exact first
		{"  x ", "", "  x "},         // two labels differ only in case: it means neither
		{"SQLite,", "SQLite", ""},    // a stray comma names nothing more
		{"sql lite", "", "sql lite"}, // a label, not a guess at one
	} {
		chosen, free := wire.Chosen(opts, []string{c.text})
		if strings.Join(chosen, "|") != c.chosen || strings.Join(free, "|") != c.free {
			t.Errorf("%q: chosen %q, free %q; want %q, %q", c.text, chosen, free, c.chosen, c.free)
		}
	}
	// The check takes a typed label where only the options are allowed.
	qs := []*pb.Question{{Options: opts[:2], Multiple: true}}
	if err := wire.CheckAnswer(qs, []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "sqlite, postgres"}}}); err != nil {
		t.Errorf("typed labels refused: %v", err)
	}
}

func TestCheckOptionsBounds(t *testing.T) {
	ok := []*pb.Option{{Label: strings.Repeat("x", wire.MaxLabelBytes), Description: strings.Repeat("d", wire.MaxDescriptionBytes)}}
	if err := wire.CheckOptions(ok); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	// An agent explains a choice in a sentence or two, in any language:
	// 150 Chinese characters (450 bytes) were refused at 200 bytes.
	zh := []*pb.Option{{Label: "继续", Description: strings.Repeat("说", 150)}}
	if err := wire.CheckOptions(zh); err != nil {
		t.Errorf("a two-sentence description in Chinese: %v", err)
	}
	if err := wire.CheckOptions([]*pb.Option{{Label: "\xff"}}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

// TestCheckOptionsOneLineLabels: a label is what a person taps or types,
// and what the clients that do not show options read on a line of its
// own under "Answer with one of:". A line break would make one label
// read as two (or as that heading again), a bidirectional control would
// turn the line around, a control character shows as nothing: such a
// label is refused, naming why. Spaces and any script are fine.
func TestCheckOptionsOneLineLabels(t *testing.T) {
	for _, l := range []string{"Yes\nNo", "Yes\r\n\r\nAnswer with one of:", "tab\there", "nul\x00", "\u0085next line",
		"line\u2028separator", "para\u2029separator", "\u202eoN", "iso\u2066late\u2069", "mark\u200f"} {
		err := wire.CheckOptions([]*pb.Option{{Label: "fine"}, {Label: l}})
		if err == nil || !strings.Contains(err.Error(), "option 2") || !strings.Contains(err.Error(), "one line") {
			t.Errorf("label %q: %v", l, err)
		}
	}
	for _, l := range []string{"Yes", " spaced out ", "PostgreSQL (the default)", "是的", "نعم", "**bold** [x](y)"} {
		if err := wire.CheckOptions([]*pb.Option{{Label: l, Description: "line one\nline two"}}); err != nil {
			t.Errorf("label %q refused: %v", l, err)
		}
	}
}

// TestCheckOptionsLabelsLookApart: a label is what a person taps, and
// two buttons that look the same (one with a space after it, a
// zero-width or other invisible character in it, a no-break space for a
// space) cannot be told apart, nor typed back one rather than the
// other; a label showing nothing (spaces, invisible characters) is no
// button at all. Both are refused, naming the option. Labels that
// differ in what a person sees, case included, are fine.
func TestCheckOptionsLabelsLookApart(t *testing.T) {
	for _, c := range []struct {
		labels []string
		want   string
	}{
		{[]string{"Yes", "Yes "}, "option 2"},
		{[]string{"Deploy", " Wait", "Wait"}, "option 3"},
		{[]string{"YES", "YES\u200b"}, "option 2"},
		{[]string{"Ship it", "Ship\u00a0it"}, "option 2"},
		{[]string{"Ship  it", "Ship it"}, "option 2"},
		{[]string{"Del\u2060ete", "De\ufeffl\u00adete"}, "option 2"},
		{[]string{"Yes", " "}, "option 2"},
		{[]string{"\u200b"}, "option 1"},
		{[]string{"No", "\u2060\ufeff \u00ad"}, "option 2"},
	} {
		var opts []*pb.Option
		for _, l := range c.labels {
			opts = append(opts, &pb.Option{Label: l})
		}
		if err := wire.CheckOptions(opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("labels %q: %v, want an error naming %s", c.labels, err, c.want)
		}
	}
	for _, ls := range [][]string{{"x", "X"}, {"Yes", "yes", "YES"}, {"👨\u200d👩\u200d👧", "👨"}, {"Café", "Cafe"}, {" Wait ", "Deploy"}} {
		var opts []*pb.Option
		for _, l := range ls {
			opts = append(opts, &pb.Option{Label: l})
		}
		if err := wire.CheckOptions(opts); err != nil {
			t.Errorf("labels %q refused: %v", ls, err)
		}
	}
}

// TestCheckOptionsLabelsLookApartInAnyForm: Unicode has more ways to
// write one look than spaces and format characters. A letter and its
// accent may come as one character or two (canonically equivalent,
// drawn alike); variation selectors, the combining grapheme joiner and
// the Hangul fillers are default-ignorable, drawn as nothing; the
// braille blank is drawn as a space; Cyrillic and Greek have letters
// drawn as Latin ones. A hostile agent offering "Deny" and "Deny" with a
// variation selector, or "Approve" with a Cyrillic A, gets two buttons
// that read the same and learns which one was tapped: refused, naming
// the option, as is a label of fillers alone. Labels in those scripts
// that read differently are fine.
func TestCheckOptionsLabelsLookApartInAnyForm(t *testing.T) {
	for _, c := range []struct {
		labels []string
		want   string
	}{
		{[]string{"Caf\u00e9", "Cafe\u0301"}, "option 2"},
		{[]string{"Deny", "Deny\ufe0f"}, "option 2"},
		{[]string{"Deny", "Deny\U000E0100"}, "option 2"},
		{[]string{"Deny", "De\u034fny"}, "option 2"},
		{[]string{"Approve", "Deny", "\u0410pprove"}, "option 3"},
		{[]string{"Deny", "D\u0435ny"}, "option 2"},
		{[]string{"Keep", "\u039a\u0435\u0435\u0440"}, "option 2"},
		{[]string{"\u3164"}, "option 1"},
		{[]string{"Yes", "\u115f\u1160"}, "option 2"},
		{[]string{"\uffa0"}, "option 1"},
		{[]string{"No", "\u2800"}, "option 2"},
		{[]string{"Ship it", "Ship\u2800it"}, "option 2"},
	} {
		var opts []*pb.Option
		for _, l := range c.labels {
			opts = append(opts, &pb.Option{Label: l})
		}
		if err := wire.CheckOptions(opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("labels %+q: %v, want an error naming %s", c.labels, err, c.want)
		}
	}
	for _, ls := range [][]string{{"\u0414\u0430", "\u041d\u0435\u0442"}, {"\u039d\u03b1\u03b9", "\u038c\u03c7\u03b9"},
		{"Caf\u00e9", "Cafe"}, {"x\u00b2", "x2"}, {"\u0421\u0442\u043e\u043f", "Stop"}, {"Tie\u0302\u0301n", "Tien"}} {
		var opts []*pb.Option
		for _, l := range ls {
			opts = append(opts, &pb.Option{Label: l})
		}
		if err := wire.CheckOptions(opts); err != nil {
			t.Errorf("labels %+q refused: %v", ls, err)
		}
	}
}

// TestChosenAppReply: the existing agentassistant's Flutter app of the
// generation that shows a request's Questions answers them as text of
// its own, "Q: <header>" then "A: <labels, comma-separated>", with a
// label's "(Recommended)" taken out (ask_question_widget.dart,
// _submitReply). That names the options chosen, so a question that takes
// only its options is answered from that app too; words of one's own
// after the labels stay free text, whole.
func TestChosenAppReply(t *testing.T) {
	opts := []*pb.Option{{Label: "Postgres (Recommended)"}, {Label: "SQLite"}, {Label: "Redis"}}
	for _, c := range []struct{ text, chosen, free string }{
		{"Q: Database\nA: Postgres", "Postgres (Recommended)", ""},
		{"Q: Which database?\nA: Postgres, SQLite", "Postgres (Recommended)|SQLite", ""},
		{"Q: Database\nA: SQLite", "SQLite", ""},
		{"Q: Database\nA: SQLite, but keep a backup", "", "Q: Database\nA: SQLite, but keep a backup"},
		{"Q: Database\nA: Postgres\nA: SQLite", "", "Q: Database\nA: Postgres\nA: SQLite"},
		{"A: SQLite", "", "A: SQLite"},
	} {
		chosen, free := wire.Chosen(opts, []string{c.text})
		if strings.Join(chosen, "|") != c.chosen || strings.Join(free, "|") != c.free {
			t.Errorf("%q: chosen %q, free %q; want %q, %q", c.text, chosen, free, c.chosen, c.free)
		}
	}
	only := []*pb.Question{{Header: "Database", Options: opts}}
	answer := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Q: Database\nA: Postgres"}}}
	if err := wire.CheckAnswer(only, answer); err != nil {
		t.Errorf("the app's reply to a question that takes only its options refused: %v", err)
	}
	// "(Recommended)" is what the app takes out, nothing else.
	if chosen, _ := wire.Chosen([]*pb.Option{{Label: "Postgres (fast)"}}, []string{"Q: x\nA: Postgres"}); chosen != nil {
		t.Errorf("a label's other words taken out: chosen %q", chosen)
	}
}
