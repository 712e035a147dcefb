package channel

import (
	"strings"
	"testing"
)

// TestLinkTextCannotDisguiseWhereItGoes: a link whose text reads as an
// address or a domain other than where it goes (invisible characters
// hidden in it or not) is shown as its text with the link where it
// goes, in Slack and in Telegram; any other link keeps its text.
func TestLinkTextCannotDisguiseWhereItGoes(t *testing.T) {
	for _, c := range []struct{ md, slack, telegram string }{
		{"[https://bank.example/login](https://evil.example/x)",
			"https://bank.example/login (<https://evil.example/x>)",
			`https://bank.example/login (<a href="https://evil.example/x">https://evil.example/x</a>)`},
		{"Sign in at [bank\u200b.example](https://bank.example.evil.example/)",
			"Sign in at bank\u200b.example (<https://bank.example.evil.example/>)",
			"Sign in at bank\u200b.example (<a href=\"https://bank.example.evil.example/\">https://bank.example.evil.example/</a>)"},
		{"[**ops@bank.example**](mailto:ops@evil.example)",
			"*ops@bank.example* (<mailto:ops@evil.example>)",
			`<b>ops@bank.example</b> (<a href="mailto:ops@evil.example">mailto:ops@evil.example</a>)`},
		{"[the dashboard](https://grafana.example/d/1) at [grafana.example](https://grafana.example/)",
			"<https://grafana.example/d/1|the dashboard> at <https://grafana.example/|grafana.example>",
			`<a href="https://grafana.example/d/1">the dashboard</a> at <a href="https://grafana.example/">grafana.example</a>`},
	} {
		if got := slackMrkdwn(c.md); got != c.slack {
			t.Errorf("Slack of %q\n got %q\nwant %q", c.md, got, c.slack)
		}
		if got, _ := telegramHTML(c.md); got != c.telegram {
			t.Errorf("Telegram of %q\n got %q\nwant %q", c.md, got, c.telegram)
		}
	}
	if got := slackMrkdwn("<https://evil.example>"); !strings.Contains(got, "|https://evil.example>") {
		t.Errorf("an autolink shows its address: %q", got)
	}
}
