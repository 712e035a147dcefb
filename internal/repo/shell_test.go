package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUnpackingMakesItsDirectory: a command the documentation shows
// that unpacks into a directory (tar -C DIR) makes DIR first in the same
// block, or names one every system has: tar does not make it, and on a
// fresh machine (macOS has no ~/.local/bin) the first command a
// newcomer copies fails.
func TestUnpackingMakesItsDirectory(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	into := regexp.MustCompile(`\btar\b.*\s-C\s+(\S+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var block []string
		inBlock := false
		for line := range strings.Lines(string(b)) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "```") {
				inBlock, block = !inBlock, nil
				continue
			}
			if !inBlock {
				continue
			}
			if m := into.FindStringSubmatch(line); m != nil && m[1] != "." && m[1] != "/" {
				made := false
				for _, prev := range block {
					made = made || strings.Contains(prev, "mkdir -p "+m[1])
				}
				if !made {
					t.Errorf("%s: %q unpacks into %s, which no mkdir -p before it makes", filepath.Base(f), line, m[1])
				}
			}
			block = append(block, line)
		}
	}
}
