package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type tabled struct {
	Host string `toml:"host"`
	Web  struct {
		Ping  Duration `toml:"ping"`
		Limit int      `toml:"limit"`
		URL   string   `toml:"url"`
	} `toml:"web"`
	Other struct {
		Keep string `toml:"keep"`
	} `toml:"other"`
}

var moves = []Move{
	{Old: "ping_seconds", New: "web.ping", Unit: time.Second},
	{Old: "history_days", New: "web.ping", Unit: 24 * time.Hour},
	{Old: "max_limit", New: "web.limit"},
	{Old: "web_url", New: "web.url"},
}

func loadTabled(t *testing.T, body string, args ...string) (tabled, *Flags, error) {
	t.Helper()
	var cfg tabled
	cfg.Other.Keep = "default"
	f := NewFlags("prog", "x.toml", false, &bytes.Buffer{})
	f.StringSetting(&cfg.Web.URL, "url", "")
	f.Rename(moves...)
	if err := f.Parse(append([]string{"-config", write(t, body)}, args...)); err != nil {
		t.Fatal(err)
	}
	_, err := f.Load(&cfg)
	return cfg, f, err
}

// TestMovedKeys: a file with the old flat names reads as one with the new
// tables, says for each old key which one to write instead, and the
// settings count as given under their new names.
func TestMovedKeys(t *testing.T) {
	cfg, f, err := loadTabled(t, "host = \"h\"\nping_seconds = 90\nmax_limit = 7\nweb_url = \"u\"\n[other]\nkeep = \"k\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "h" || cfg.Web.Ping != Duration(90*time.Second) || cfg.Web.Limit != 7 || cfg.Web.URL != "u" || cfg.Other.Keep != "k" {
		t.Fatalf("got %+v", cfg)
	}
	var warned []string
	for _, m := range f.Moved() {
		warned = append(warned, m.String())
	}
	want := []string{`ping_seconds is deprecated; use [web] ping = "90s"`, "max_limit is deprecated; use [web] limit", "web_url is deprecated; use [web] url"}
	if strings.Join(warned, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(warned, "\n"), strings.Join(want, "\n"))
	}
	c := f.Check()
	if !c.Set("web.ping", "") || !c.Set("web.limit", "") || c.Set("ping_seconds", "") {
		t.Error("a moved key does not count as given under its new name")
	}
	c.Positive("web.ping", "", -time.Second)
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), `setting web.ping (written as ping_seconds) = "-1s" is not allowed`) {
		t.Errorf("a problem with a moved key does not say how it was written: %v", err)
	}

	var logs bytes.Buffer
	f.LogMoved(slog.New(slog.NewTextHandler(&logs, nil)))
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 || !strings.Contains(logs.String(), `ping_seconds is deprecated; use [web] ping = \"90s\"`) {
		t.Errorf("logged:\n%s", logs.String())
	}

	cfg, f, err = loadTabled(t, "history_days = 30\n")
	if err != nil || cfg.Web.Ping != Duration(720*time.Hour) || f.Moved()[0].String() != `history_days is deprecated; use [web] ping = "720h"` {
		t.Fatalf("days: %+v %v %v", cfg, f.Moved(), err)
	}
	cfg, f, err = loadTabled(t, "[web]\nping = \"2m\"\n")
	if err != nil || cfg.Web.Ping != Duration(2*time.Minute) || len(f.Moved()) != 0 {
		t.Fatalf("new key: %+v %v %v", cfg, f.Moved(), err)
	}
}

// TestMovedKeyAndFlag: a flag wins over a setting written under its old
// name, as over the new one.
func TestMovedKeyAndFlag(t *testing.T) {
	cfg, _, err := loadTabled(t, "web_url = \"file\"\n", "-url", "flag")
	if err != nil || cfg.Web.URL != "flag" {
		t.Fatalf("got %q, %v", cfg.Web.URL, err)
	}
}

// TestMovedKeyErrors: both names of one setting, a bad duration, a bare
// number for a duration, an old count that is no whole number or does
// not fit: each is refused naming the key.
func TestMovedKeyErrors(t *testing.T) {
	for body, want := range map[string]string{
		"ping_seconds = 5\n[web]\nping = \"5s\"\n": "ping_seconds and [web] ping are the same setting",
		"history_days = 1\nping_seconds = 5\n":     "ping_seconds and history_days are the same setting, [web] ping",
		"max_limit = 1\n[web]\nlimit = 2\n":        "max_limit and [web] limit are the same setting",
		"[web]\nping = \"soon\"\n":                 `web.ping`,
		"[web]\nping = 30\n":                       `"30" is no duration`,
		"ping_seconds = \"30s\"\n":                 "ping_seconds = 30s: it must be a whole number",
		"history_days = 200000\n":                  "history_days = 200000 is not allowed",
		"max_limit = \"x\"\n":                      "max_limit",
		"pingseconds = 1\n":                        "unknown keys: pingseconds",
		"[web]\nping_seconds = 1\n":                "unknown keys: web.ping_seconds",
	} {
		_, _, err := loadTabled(t, body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 30 * time.Second: "30s", 2 * time.Minute: "2m", 720 * time.Hour: "720h",
		90 * time.Second: "90s", 1500 * time.Millisecond: "1.5s", -time.Second: "-1s"} {
		if got := Duration(d).String(); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

// TestUnknownKeyHints: a key the binary does not read is refused naming
// it and what to write instead: the key it is closest to, the same key in
// its own table, or the keys its table (or the file) can hold.
func TestUnknownKeyHints(t *testing.T) {
	for body, want := range map[string]string{
		"[web]\npingg = \"30s\"\n":     "web.pingg (did you mean [web] ping?)",
		"[wbe]\nping = \"30s\"\n":      "wbe.ping (did you mean [web] ping?)",
		"ping = \"30s\"\n":             "ping (did you mean [web] ping?)",
		"[other]\nping = \"30s\"\n":    "other.ping (did you mean [web] ping?)",
		"hots = \"h\"\n":               "hots (did you mean host?)",
		"[web]\nfrobnicate = 1\n":      "web.frobnicate ([web] holds ping, limit, url)",
		"[zzz]\nfrobnicate = 1\n":      "zzz.frobnicate (the file holds host and the tables [web], [other])",
		"[web]\npingg = 1\nlimt = 2\n": "unknown keys: web.limt (did you mean [web] limit?), web.pingg (did you mean [web] ping?)",
	} {
		_, _, err := loadTabled(t, body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
		if err != nil && strings.Contains(body, "[wbe]") && strings.Contains(err.Error(), "wbe,") {
			t.Errorf("%q: %v names the table as a key of its own", body, err)
		}
	}
}

// TestWrongTypeHints: a value of the wrong type is refused naming the key
// as the file writes it, the type it must be, and how to write it.
func TestWrongTypeHints(t *testing.T) {
	for body, want := range map[string][]string{
		"[web]\nlimit = \"7\"\n": {"line 2", "[web] limit", "must be an integer", "without quotes"},
		"host = 5\n":             {"line 1", "host", "must be a string", "in quotes"},
	} {
		_, _, err := loadTabled(t, body)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v, want %q", body, err, w)
			}
		}
	}
}

// TestMovedKeyOfWrongTypeSaysHowToWriteIt: an old key with a value of
// the wrong type is told as a new key's would be, at the old key's own
// line and name, not as the decoder saw it in the table it moved to.
func TestMovedKeyOfWrongTypeSaysHowToWriteIt(t *testing.T) {
	for body, want := range map[string]string{
		"host = \"h\"\n\nmax_limit = \"x\"\n": `line 3: max_limit must be an integer, not a string: write it without quotes (it is now [web] limit)`,
		"web_url = 5\n":                       `line 1: web_url must be a string, not an integer: write it in quotes (it is now [web] url)`,
	} {
		_, _, err := loadTabled(t, body)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "incompatible") {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestDurationRefusalSaysWhy: a duration that does not read is refused
// saying what is wrong with it as written: a bare number has no unit, a
// day is no unit ("there is no d", as docs/configuration.md says), and
// one past the longest Go holds (about 292 years, the most the page
// allows) is too long, not "no duration" to be written with its unit.
func TestDurationRefusalSaysWhy(t *testing.T) {
	for in, want := range map[string]string{
		"30":       `"30" is no duration: write it as a string with its unit`,
		"30d":      `"30d" has a unit Go does not read (h, m, s, ms, us, ns): there is no d; write "720h" for 30 days`,
		"2w":       `"2w" has a unit Go does not read (h, m, s, ms, us, ns)`,
		"2562048h": `"2562048h" is longer than the longest duration, 2562047h (about 292 years)`,
		"half":     `"half" is no duration: write it as a string with its unit`,
	} {
		var d Duration
		err := d.UnmarshalText([]byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want it to start %q", in, err, want)
		}
	}
	var d Duration
	if err := d.UnmarshalText([]byte("2562047h")); err != nil || time.Duration(d) != 2562047*time.Hour {
		t.Errorf("2562047h: %v, %v", d, err)
	}
}
