package main

import (
	"strings"
	"testing"
)

// TestChannelAddressesMustWork: a channel's address that cannot be
// reached as written (a URL without http:// or https://, a mail server
// without its port) is refused at start, naming the setting and the
// value, as every other setting that cannot work; before, the server
// started and each question failed to go out, said only in the log.
func TestChannelAddressesMustWork(t *testing.T) {
	const (
		hook  = "[channels.webhook]\nsecret = \"0123456789abcdef0123\"\n"
		tg    = "[channels.telegram]\nbot_token = \"1:x\"\nchats = [1]\n"
		slack = "[channels.slack]\nbot_token = \"xoxb-1\"\napp_token = \"xapp-1\"\nchannel = \"C1\"\nusers = [\"U1\"]\n"
		mail  = "[channels.email]\nfrom = \"a@example.org\"\nto = [\"b@example.org\"]\n"
	)
	for _, c := range []struct{ body, want string }{
		{"[channels.ntfy]\ntopic = \"t\"\nurl = \"ntfy.sh\"\n", `channels.ntfy: url = "ntfy.sh"`},
		{"[channels.ntfy]\ntopic = \"t\"\nurl = \"ftp://ntfy.sh\"\n", `channels.ntfy: url = "ftp://ntfy.sh"`},
		{hook + "url = \"n8n.example.org/webhook/aa\"\n", `channels.webhook: url = "n8n.example.org/webhook/aa"`},
		{tg + "api_url = \"api.telegram.org\"\n", `channels.telegram: api_url = "api.telegram.org"`},
		{slack + "api_url = \"slack.com/api/\"\n", `channels.slack: api_url = "slack.com/api/"`},
		{mail + "smtp_addr = \"smtp.example.org\"\n", `channels.email: smtp_addr = "smtp.example.org"`},
		{mail + "smtp_addr = \"smtp.example.org:587\"\nimap_addr = \"imap.example.org\"\n", `channels.email: imap_addr = "imap.example.org"`},
		{mail + "smtp_addr = \"smtp.example.org:0\"\n", `channels.email: smtp_addr = "smtp.example.org:0"`},
	} {
		stdout, _, err := start(t, c.body)
		if err == nil {
			t.Errorf("%s: started (%q)", c.body, stdout)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: the error %q does not say %q", c.body, err, c.want)
		}
	}
	for _, body := range []string{
		"[channels.ntfy]\ntopic = \"t\"\n", // the default, ntfy.sh
		"[channels.ntfy]\ntopic = \"t\"\nurl = \"http://192.168.1.5:8080/\"\n",
		hook + "url = \"https://n8n.example.org/webhook/aa?x=1\"\n",
		tg + "api_url = \"http://127.0.0.1:8081\"\n",
		slack + "api_url = \"https://slack.com/api/\"\n",
		mail + "smtp_addr = \"smtp.example.org:587\"\nimap_addr = \"[2001:db8::1]:993\"\n",
	} {
		if stdout, _, err := start(t, body); err != nil || !strings.Contains(stdout, "is running") {
			t.Errorf("%s: %v", body, err)
		}
	}
}
