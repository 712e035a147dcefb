package channel

import (
	"encoding/base64"
	"testing"
)

// TestTelegramHTML: a question's markdown becomes the HTML Telegram
// accepts, everything a person typed escaped; links only to http(s) and
// mailto; data: images are taken out as photos, others stay links.
func TestTelegramHTML(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	data := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	for _, c := range []struct{ md, want string }{
		{"**Deploy** the `shop` _now_?", "<b>Deploy</b> the <code>shop</code> <i>now</i>?"},
		{"# Release\n\nIt has ~~two~~ three migrations.", "<b>Release</b>\n\nIt has <s>two</s> three migrations."},
		{"- one\n- two\n\n1. first\n2. second", "• one\n• two\n\n1. first\n2. second"},
		{"```sql\nDROP TABLE users; -- <b>\n```", "<pre><code class=\"language-sql\">DROP TABLE users; -- &lt;b&gt;\n</code></pre>"},
		{"> quoted *text*", "<blockquote>quoted <i>text</i></blockquote>"},
		{"a <script>alert(1)</script> & b", "a &lt;script&gt;alert(1)&lt;/script&gt; &amp; b"},
		{"[docs](https://example.org/a?b=1&c=2) [bad](javascript:alert(1)) <https://x.example>",
			`<a href="https://example.org/a?b=1&amp;c=2">docs</a> bad <a href="https://x.example">https://x.example</a>`},
		{"line one\nline two", "line one\nline two"},
		{"See ![the chart](https://example.org/c.png)", `See <a href="https://example.org/c.png">[the chart]</a>`},
	} {
		got, photos := telegramHTML(c.md)
		if got != c.want || len(photos) != 0 {
			t.Errorf("telegramHTML(%q)\n got %q (%d photos)\nwant %q", c.md, got, len(photos), c.want)
		}
	}
	got, photos := telegramHTML("Which layout?\n\n![the old one](" + data + ")\n\n- ![new](" + data + ")")
	if got != "Which layout?\n\n[the old one]\n\n• [new]" || len(photos) != 2 || photos[0].alt != "the old one" ||
		photos[0].mime != "image/png" || string(photos[1].data) != string(png) {
		t.Errorf("with images: %q, %+v", got, photos)
	}
}
