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

// TestUnpackingTheArchiveSpillsNothing: a documented command that
// unpacks a whole release archive does it into a directory of its own
// (tar -C DIR, made by the TestUnpackingMakesItsDirectory rule) or names
// the members it takes. The archive has no top directory: unpacked where
// the reader stands, its README.md, SECURITY.md and docs/ land there,
// over a README.md of that directory.
func TestUnpackingTheArchiveSpillsNothing(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	whole := regexp.MustCompile(`\btar\s+-x\S*\s+(agentassistant_\S+\.tar\.gz)\s*($|[;&|#])`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if whole.MatchString(line) {
				t.Errorf("%s: %q unpacks the whole archive into the current directory", filepath.Base(f), strings.TrimSpace(line))
			}
		}
	}
}
