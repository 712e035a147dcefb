package typing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hello 你好", "hello 你好"},
		{"a\r\nb\rc\nd", "a\nb\nc\nd"},
		{"line\u2028sep\u2029para", "line\nsep\npara"},
		{"tab\there", "tab\there"},
		// Escape, Ctrl-C, DEL, a C1 CSI and a terminal escape sequence all go.
		{"rm\x1b[2J -rf\x03 x\x7f\u009b1m", "rm[2J -rf x1m"},
		{"bad \xff utf8", "bad  utf8"},
		{"emoji 👍🏽", "emoji 👍🏽"},
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSegments(t *testing.T) {
	got := Segments("hello 你好\nsecond\tline\n")
	want := []Segment{{Text: "hello 你好"}, {Key: Enter}, {Text: "second"}, {Key: Tab}, {Text: "line"}, {Key: Enter}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Segments = %#v, want %#v", got, want)
	}
	chars := 0
	for _, s := range got {
		chars += s.Chars()
	}
	if chars != 8+1+6+1+4+1 {
		t.Errorf("chars = %d", chars)
	}
	long := Segments(strings.Repeat("字", 450))
	if len(long) != 3 || long[0].Chars() != 200 || long[2].Chars() != 50 {
		t.Errorf("a 450-character text splits as %d segments", len(long))
	}
	if s := Segments(""); len(s) != 0 {
		t.Errorf("empty text gives %v", s)
	}
}

// recorder is a Keyboard that records what it was asked to do.
type recorder struct {
	ops  []string
	fail int // fail on this call (1-based); 0 never
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Type(_ context.Context, s string) error {
	return r.op("type " + s)
}
func (r *recorder) Press(_ context.Context, k Key, n int) error {
	return r.op(strings.Repeat(k.String()+" ", n))
}
func (r *recorder) op(s string) error {
	r.ops = append(r.ops, strings.TrimSpace(s))
	if len(r.ops) == r.fail {
		return errors.New("boom")
	}
	return nil
}

func TestWriteReportsWhatWasTyped(t *testing.T) {
	r := &recorder{fail: 3}
	var done []Segment
	err := Write(context.Background(), r, "one\r\ntwo\nthree", func(s Segment) { done = append(done, s) })
	if err == nil || err.Error() != "boom" {
		t.Fatalf("err = %v", err)
	}
	if want := []string{"type one", "Enter", "type two"}; !reflect.DeepEqual(r.ops, want) {
		t.Errorf("ops = %q, want %q", r.ops, want)
	}
	if len(done) != 2 {
		t.Errorf("done reported %d segments; two reached the window before the failure", len(done))
	}
}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func onPath(names ...string) func(string) (string, error) {
	return func(n string) (string, error) {
		for _, m := range names {
			if m == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", errors.New("not found")
	}
}

func TestDetect(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the X11/Wayland choice is made on Linux and the BSDs")
	}
	x11 := func(display string) (Keyboard, error) {
		if display == ":9" {
			return nil, &Unavailable{Why: "cannot reach the X display \":9\""}
		}
		return &recorder{}, nil
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		path    []string
		backend string
		want    string // the Keyboard's name, or text the error must hold
		wantErr bool
	}{
		{"x11", map[string]string{"DISPLAY": ":0"}, nil, "", "recorder", false},
		{"x11 unreachable", map[string]string{"DISPLAY": ":9"}, []string{"xdotool"}, "", `cannot reach the X display ":9"`, true},
		{"wayland with wtype", map[string]string{"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, []string{"wtype", "xdotool"}, "", "wtype", false},
		{"wayland without wtype, xwayland", map[string]string{"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, nil, "", "X11 windows only", false},
		{"wayland with nothing", map[string]string{"WAYLAND_DISPLAY": "wayland-0"}, []string{"xdotool"}, "", "apt install wtype", true},
		{"no session", nil, []string{"xdotool", "wtype"}, "", "neither WAYLAND_DISPLAY nor DISPLAY", true},
		{"forced xdotool", map[string]string{"DISPLAY": ":0"}, []string{"xdotool"}, "xdotool", "xdotool", false},
		{"forced xtest", map[string]string{"DISPLAY": ":0"}, nil, "xtest", "recorder", false},
		// Forced, but with no session for it (over ssh): said at start,
		// not at the first message typed.
		{"forced xdotool without a display", nil, []string{"xdotool"}, "xdotool", "DISPLAY is not set", true},
		{"forced wtype without wayland", map[string]string{"DISPLAY": ":0"}, []string{"wtype"}, "wtype", "WAYLAND_DISPLAY is not set", true},
		{"forced but missing", nil, nil, "xdotool", "xdotool was not found on PATH: install xdotool (Debian/Ubuntu: sudo apt install xdotool", true},
		{"unknown", nil, nil, "robot", `unknown typing backend "robot"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kb, err := New(Options{Backend: tc.backend, Getenv: env(tc.env), LookPath: onPath(tc.path...), openX11: x11})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(kb.Name(), tc.want) {
				t.Errorf("Name() = %q, want %q", kb.Name(), tc.want)
			}
		})
	}
}

// fakeTool puts a program called name in a directory of its own that
// records the arguments of each call, joined with "|"; with fail set it
// instead exits 1 saying fail on stderr.
func fakeTool(t *testing.T, name, fail string) (lookPath func(string) (string, error), calls func() []string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts stand in for the tools")
	}
	dir := t.TempDir()
	log, msg := filepath.Join(dir, "calls"), filepath.Join(dir, "fail")
	script := "#!/bin/sh\n"
	if fail != "" {
		if err := os.WriteFile(msg, []byte(fail), 0o600); err != nil {
			t.Fatal(err)
		}
		script += `cat "` + msg + `" >&2; exit 1` + "\n"
	}
	// \036 ends a call, \037 separates its arguments.
	script += `for a in "$@"; do printf '%s\037' "$a"; done >> "` + log + `"; printf '\036' >> "` + log + `"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return func(n string) (string, error) {
			if n != name {
				return "", errors.New("not found")
			}
			return filepath.Join(dir, name), nil
		}, func() []string {
			b, _ := os.ReadFile(log)
			var out []string
			for _, c := range strings.Split(strings.TrimSuffix(string(b), "\036"), "\036") {
				out = append(out, strings.ReplaceAll(strings.TrimSuffix(c, "\037"), "\037", "|"))
			}
			return out
		}
}

func TestToolCommandLines(t *testing.T) {
	const text = "-n 你好\nok"
	for _, tc := range []struct {
		tool string
		want []string
	}{
		{"xdotool", []string{"type|--delay|12|---n 你好", "key|--delay|12|Return", "type|--delay|12|--|ok", "key|--delay|12|BackSpace|BackSpace|BackSpace"}},
		{"wtype", []string{"---n 你好", "-k|Return", "--|ok", "-k|BackSpace|-k|BackSpace|-k|BackSpace"}},
		{"osascript", []string{"-e|" + pasteScript + "|+-n 你好", "-e|" + keyScript + "|36|1", "-e|" + pasteScript + "|+ok", "-e|" + keyScript + "|51|3"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			lp, calls := fakeTool(t, tc.tool, "")
			kb, err := New(Options{Backend: tc.tool, LookPath: lp, Getenv: env(desktop)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := Write(ctx, kb, text, nil); err != nil {
				t.Fatal(err)
			}
			if err := kb.Press(ctx, Backspace, 3); err != nil {
				t.Fatal(err)
			}
			got := calls()
			// "--" and the text are separate arguments; the log joins them.
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.Replace(w, "---n", "--|-n", 1)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("calls:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

func TestToolFailureSaysWhy(t *testing.T) {
	lp, _ := fakeTool(t, "xdotool", "Error: Can't open display: (null)")
	kb, err := New(Options{Backend: "xdotool", LookPath: lp, Getenv: env(map[string]string{"DISPLAY": ":0"})})
	if err != nil {
		t.Fatal(err)
	}
	err = kb.Type(context.Background(), "x")
	if err == nil || !strings.Contains(err.Error(), "Can't open display") {
		t.Fatalf("err = %v, want what xdotool said", err)
	}
}

func TestLongBackspaceRunsInBatches(t *testing.T) {
	lp, calls := fakeTool(t, "wtype", "")
	kb, _ := New(Options{Backend: "wtype", LookPath: lp, Getenv: env(desktop)})
	if err := kb.Press(context.Background(), Backspace, 120); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range calls() {
		n += strings.Count(c, "BackSpace")
		if strings.Count(c, "BackSpace") > 50 {
			t.Errorf("one call pressed %d keys", strings.Count(c, "BackSpace"))
		}
	}
	if n != 120 {
		t.Errorf("pressed %d Backspaces, want 120", n)
	}
}

// desktop is a session with both displays, for the tools that need one.
var desktop = map[string]string{"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}
