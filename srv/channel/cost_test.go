package channel

import (
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// What a question costs to show, whatever markdown an agent builds to
// make it cost: bytes allocated (not time) for each way a channel shows
// it, and the size of what it makes.

// costly are texts built to cost: constructs nested as deep as the text
// is long, runs no parser closes, images megabytes long.
func costly() map[string]string {
	const n = 1 << 20
	return map[string]string{
		"brackets":       strings.Repeat("[", n),
		"quotes":         strings.Repeat(">", n),
		"quoted lists":   strings.Repeat("> - ", n/4),
		"list items":     strings.Repeat("- a\n", n/4),
		"backticks":      strings.Repeat("a`` ", n/4),
		"link refs":      strings.Repeat("[a]: http://x\n", n/14) + strings.Repeat("[a]", 1000),
		"html blocks":    strings.Repeat("<div>\n", n/6),
		"emphasis":       strings.Repeat("*a_", n/3),
		"open links":     strings.Repeat("[a](", n/4),
		"open images":    strings.Repeat("![", n/2),
		"open data":      strings.Repeat("![x](data:image/png;base64,", n/27),
		"table":          strings.Repeat("|a|b|\n", n/6),
		"escapes":        strings.Repeat("<&>", n/3),
		"10 MiB image":   "![x](data:image/png;base64," + strings.Repeat("A", 10<<20) + ")",
		"spaced no data": strings.Repeat("![", n/4) + "](" + strings.Repeat(" ", n/2) + "x",
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCostOfAQuestionIsBounded: each way of showing a question
// allocates a bounded multiple of the text it is given (a copy or two),
// however its markdown nests, and makes a bounded result.
func TestCostOfAQuestionIsBounded(t *testing.T) {
	shows := map[string]func(string) int{
		"plain": func(s string) int { return len(Plain(s)) },
		"slack": func(s string) int { o, _ := slackQuestion(s, maxSlackQuestion); return len(o) },
		"telegram": func(s string) int {
			o, _, _ := telegramQuestion(s, maxTelegramMessage)
			return tgLen(o)
		},
	}
	bounds := map[string]int{"plain": 16 << 10, "slack": maxSlackQuestion, "telegram": maxTelegramMessage}
	for name, text := range costly() {
		for show, f := range shows {
			var out int
			// Images are decoded for Telegram's photos: their bytes count.
			most := uint64(3*len(text)) + 8<<20
			if got := allocated(func() { out = f(text) }); got > most {
				t.Errorf("%s of %s: %d bytes allocated, more than %d", show, name, got, most)
			}
			if out > bounds[show] {
				t.Errorf("%s of %s: %d long, more than %d", show, name, out, bounds[show])
			}
		}
	}
}

// TestDataImagesFoundAsTheirPattern: replaceDataImages finds each data:
// image the pattern it is written from finds, on texts made of the
// pieces that make and unmake one.
func TestDataImagesFoundAsTheirPattern(t *testing.T) {
	pattern := regexp.MustCompile(`!\[([^\]\n]*)\]\(\s*<?data:[^)]*\)`)
	pieces := []string{"!", "[", "]", "(", ")", "![", "](", "data:", "<", " ", "\n", "\t", "a", "data:image/png;base64,AAA", "x"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(16) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		md := b.String()
		want := pattern.ReplaceAllStringFunc(md, func(m string) string {
			sm := pattern.FindStringSubmatch(m)
			return "{" + sm[1] + "|" + m[strings.Index(m, "](")+2:len(m)-1] + "}"
		})
		got := replaceDataImages(md, func(alt, dest string) string { return "{" + alt + "|" + dest + "}" })
		if got != want {
			t.Fatalf("%q: got %q, want %q", md, got, want)
		}
	}
}

// TestPlainReadsALineOrTwo: Plain (a push's body, made for each of a
// token's subscriptions) parses only the start of a text: on a text of
// constructs nested as deep as it is long, it allocates no more than
// 2 MiB however long the text.
func TestPlainReadsALineOrTwo(t *testing.T) {
	for name, text := range map[string]string{
		"quotes": strings.Repeat(">", 1<<20), "lists": strings.Repeat("- ", 1<<19),
		"emphasis": strings.Repeat("*a_", 1<<18), "open links": strings.Repeat("[a](", 1<<18),
	} {
		if got := allocated(func() { Plain(text) }); got > 2<<20 {
			t.Errorf("Plain of %s: %d bytes allocated", name, got)
		}
	}
}
