package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type settings struct {
	Host  string `toml:"host"`
	Port  int    `toml:"port"`
	Token string `toml:"token"`
	Other string `toml:"other"`
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parse(t *testing.T, partial bool, args ...string) (settings, *Flags, string, error) {
	t.Helper()
	cfg := settings{Host: "127.0.0.1", Port: 22080, Other: "default"}
	var out bytes.Buffer
	f := NewFlags("prog", "x.toml", partial, &out)
	f.StringSetting(&cfg.Host, "host", "")
	f.IntSetting(&cfg.Port, "port", "")
	f.StringSetting(&cfg.Token, "token", "")
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	path, err := f.Load(&cfg)
	return cfg, f, path, err
}

// TestDefaultsFileFlags: a setting is its default, then the file's, then
// the flag's when given, even when the flag repeats the default.
func TestDefaultsFileFlags(t *testing.T) {
	file := write(t, "host = \"0.0.0.0\"\nport = 9999\ntoken = \"from-file\"\n")
	cfg, f, path, err := parse(t, false, "-config", file, "-port", "22080", "-token", "from-flag")
	if err != nil || path != file {
		t.Fatalf("load: %q %v", path, err)
	}
	want := settings{Host: "0.0.0.0", Port: 22080, Token: "from-flag", Other: "default"}
	if cfg != want {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
	if !f.Given("token") || f.Given("host") {
		t.Error("Given does not tell the flags on the command line")
	}
	cfg, _, path, err = parse(t, false, "-host", "::1")
	if err != nil || path != "" || cfg.Host != "::1" || cfg.Port != 22080 {
		t.Fatalf("no file: %+v %q %v", cfg, path, err)
	}
}

// TestUnknownKeys: a binary's own file must not hold keys it does not
// know (a misspelt setting); a file shared with another binary may.
func TestUnknownKeys(t *testing.T) {
	file := write(t, "host = \"h\"\nprot = 1\n")
	if _, _, _, err := parse(t, false, "-config", file); err == nil || !strings.Contains(err.Error(), "unknown keys: prot") {
		t.Fatalf("strict: %v", err)
	}
	cfg, _, _, err := parse(t, true, "-config", file)
	if err != nil || cfg.Host != "h" {
		t.Fatalf("partial: %+v %v", cfg, err)
	}
	if _, _, _, err := parse(t, true, "-config", write(t, "host = 5\n")); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Fatalf("a wrong type in a shared file: %v", err)
	}
	if _, _, _, err := parse(t, false, "-config", filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Fatal("an explicit file that does not exist was ignored")
	}
}

func TestLogger(t *testing.T) {
	var b bytes.Buffer
	l, err := Logger("warn", &b)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") {
		t.Fatalf("logged %q", s)
	}
	if _, err := Logger("loud", &b); err == nil || !strings.HasPrefix(err.Error(), "log level: ") {
		t.Fatalf("bad level: %v", err)
	}
}

// TestStrayArgument: a word among the flags stops Go's flag parsing, so
// every flag after it would be silently ignored; it is an error instead.
func TestStrayArgument(t *testing.T) {
	cfg, _, _, err := parse(t, false, "-token", "x", "oops", "-port", "1234")
	if err == nil || !strings.Contains(err.Error(), `"oops"`) {
		t.Fatalf("a stray argument was accepted (port %d): %v", cfg.Port, err)
	}
}

// TestCheck: a rule applies to a setting given in the file or by its flag,
// not to one left to its default; each problem names the key, its flag
// and the value.
func TestCheck(t *testing.T) {
	cfg, f, _, err := parse(t, false, "-config", write(t, "other = \"\"\n"), "-port", "-1")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Check()
	if !c.Set("other", "") || !c.Set("port", "port") || c.Set("host", "host") || c.Set("token", "token") {
		t.Fatal("Set does not tell the settings given from those left out")
	}
	c.Int("port", "port", int64(cfg.Port), 0, 65535, "")
	c.Count("host", "host", -5, 1) // not given: its default stands
	c.Int("other", "", 1<<40, 1, 1<<30, "")
	err = c.Err()
	if err == nil {
		t.Fatal("no problem found")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || lines[0] != "setting port (-port) = -1 is not allowed: it must be from 0 to 65535" ||
		!strings.HasPrefix(lines[1], "setting other = 1099511627776 is not allowed: it must be from 1 to ") {
		t.Fatalf("problems: %q", lines)
	}
}

func TestHostAndOrigin(t *testing.T) {
	for s, want := range map[string]bool{"mybox.lan": true, "10.0.0.2": true, "fe80::1": true, "my_box": true,
		"": false, "http://x": false, "x:80": false, "[::1]": false, "x/y": false, "a..b": false, ".x": false, "x y": false} {
		if HostName(s) != want {
			t.Errorf("HostName(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{"http://localhost:5173": true, "https://[::1]:8443": true, "chrome-extension://abc": true, "https://x.y": true,
		"not a url": false, "http://x/": false, "http://x:80": false, "https://x:443": false, "http://x:0": false, "http://x:": false,
		"http://u@x": false, "http://x?": false, "http://x#": false, "x": false, "localhost:5173": false, "http://[zz]:1": false} {
		if err := Origin(s); (err == nil) != want {
			t.Errorf("Origin(%q): %v", s, err)
		}
	}
}
