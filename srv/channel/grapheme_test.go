package channel

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutKeepsWhatAPersonSeesWhole: a cut (a long question's, a button's
// label) never splits what a person sees as one character: a flag's two
// letters, a family joined by U+200D, a letter and its accent, an emoji
// and its skin tone.
func TestCutKeepsWhatAPersonSeesWhole(t *testing.T) {
	for _, c := range []struct{ unit, whole string }{
		{"🇺🇦", "flag"},
		{"👨‍👩‍👧‍👦", "family"},
		{"e\u0301", "accented letter"},
		{"👍🏽", "skin tone"},
		{"❤️", "variation"},
	} {
		s := "x" + strings.Repeat(c.unit, 200)
		for n := 10; n < 80; n++ {
			got, _ := clipText(s, n)
			if rest := strings.TrimPrefix(got, "x"); strings.ReplaceAll(rest, c.unit, "") != "" {
				t.Fatalf("clipText of %ss to %d: %q", c.whole, n, got)
			}
			clipped := strings.TrimSuffix(Clip(s, n), "…")
			if rest := strings.TrimPrefix(clipped, "x"); strings.ReplaceAll(rest, c.unit, "") != "" || !utf8.ValidString(clipped) {
				t.Fatalf("Clip of %ss to %d: %q", c.whole, n, clipped)
			}
		}
	}
}

// TestCutOfBrokenText: a text of stray bytes is cut, not a panic.
func TestCutOfBrokenText(t *testing.T) {
	s := strings.Repeat("\x80", 100)
	if got := Clip(s, 60); len(got) > 60 {
		t.Errorf("Clip: %q", got)
	}
	if got, cut := clipText(s, 60); len(got) > 60 || !cut {
		t.Errorf("clipText: %q", got)
	}
}

// TestClipToNoRoom: what goes with a question (its options, its
// title) may leave it no room, or less than none: it is then left out,
// said to be cut, and nothing panics.
func TestClipToNoRoom(t *testing.T) {
	for _, n := range []int{0, -1, -4096} {
		if got, cut := clipText("Deploy?", n); got != "" || !cut {
			t.Errorf("clipText to %d = %q, %v", n, got, cut)
		}
	}
	if got, cut := clipText("", -1); got != "" || cut {
		t.Errorf("clipText of nothing = %q, %v", got, cut)
	}
}
