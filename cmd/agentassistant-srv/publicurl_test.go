package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicURLMustBeAnAddress: [channels] public_url is where ntfy's
// buttons and a webhook's answer.url post and where a notification's tap
// opens the app; one without http(s)://host would give every button an
// address nobody can reach, so it is refused at start, naming the key.
func TestPublicURLMustBeAnAddress(t *testing.T) {
	for _, bad := range []string{
		"aa.example.org",
		"ftp://aa.example.org",
		"https://",
		"https://user:pw@aa.example.org",
		"https://aa.example.org/?x=1",
		"https://aa.example.org/#top",
		"https://aa example.org",
	} {
		body := "[channels]\npublic_url = \"" + bad + "\"\n[channels.ntfy]\ntopic = \"t\"\n"
		stdout, _, err := start(t, body)
		if err == nil {
			t.Errorf("public_url = %q: started (%q)", bad, stdout)
			continue
		}
		for _, want := range []string{"channels.public_url", bad, "https://"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("public_url = %q: the error %q does not say %q", bad, err, want)
			}
		}
	}
	for _, good := range []string{"https://aa.example.org", "https://aa.example.org/", "http://192.168.1.20:22080", "https://[2001:db8::1]:8443"} {
		body := "[channels]\npublic_url = \"" + good + "\"\n[channels.ntfy]\ntopic = \"t\"\n"
		if stdout, _, err := start(t, body); err != nil || !strings.Contains(stdout, "is running") {
			t.Errorf("public_url = %q: %v", good, err)
		}
	}
}

// TestPublicURLIsAnsweredAt: the server answers at [channels] public_url,
// the address its channels' buttons post to and their taps open: behind a
// reverse proxy that passes that name on as the Host, a button's post and
// the app opened there pass the Host and Origin checks without the name
// given again in allowed_hosts and allowed_origins.
func TestPublicURLIsAnsweredAt(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "srv.toml")
	if err := os.WriteFile(cfg, []byte("[channels]\npublic_url = \"https://AA.example.org/\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := runServer(t, "-config", cfg)
	token := u.Query().Get("token")
	do := func(method, path, origin string) *http.Response {
		t.Helper()
		r, err := http.NewRequest(method, "http://"+u.Host+path, strings.NewReader(`{"cap":"x","text":"Yes"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Host = "aa.example.org"
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	// The app the notification's tap opens.
	if res := do("GET", "/", ""); res.StatusCode != http.StatusOK {
		t.Errorf("GET / at public_url's host: %s", res.Status)
	}
	// A button's post: refused for its capability (400), not for its Host.
	if res := do("POST", "/push/answer", ""); res.StatusCode == http.StatusForbidden {
		t.Errorf("POST /push/answer at public_url's host: %s", res.Status)
	}
	// The app there, as the browser sends its origin (proxied to HTTP).
	if res := do("POST", "/mcp", "https://aa.example.org"); res.StatusCode == http.StatusForbidden {
		t.Errorf("POST /mcp from public_url's origin: %s", res.Status)
	}
	// Another site is still refused.
	if res := do("POST", "/mcp", "https://elsewhere.example"); res.StatusCode != http.StatusForbidden {
		t.Errorf("POST /mcp from another origin: %s, want 403", res.Status)
	}
}
