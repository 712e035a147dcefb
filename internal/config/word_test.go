package config

import (
	"io"
	"strings"
	"testing"
)

// TestFlagWrittenAsAWord: a flag's name given as a word ("version",
// as other tools take it) is refused pointing at the flag.
func TestFlagWrittenAsAWord(t *testing.T) {
	var cfg struct{ Port int }
	for args, want := range map[string]string{
		"version":     `unexpected argument "version": did you mean -version?`,
		"port 80":     `unexpected argument "port": did you mean -port?`,
		"-port 1 two": `unexpected argument "two": every setting is a flag`,
	} {
		f := NewFlags("tool", "tool.toml", false, io.Discard)
		f.IntSetting(&cfg.Port, "port", "port")
		if err := f.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		t.Chdir(t.TempDir())
		if _, err := f.Load(&cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
