package repo

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archivedFiles is what .goreleaser.yaml's archives put next to the
// binaries: its files: list, globs expanded, relative to the repository.
func archivedFiles(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(b), "\n    files:\n")
	if !ok {
		t.Fatal(".goreleaser.yaml's archives list no files")
	}
	var files []string
	for line := range strings.Lines(list) {
		item, ok := strings.CutPrefix(line, "      - ")
		if !ok {
			break
		}
		matches, err := filepath.Glob(filepath.Join("../..", strings.TrimSpace(item)))
		if err != nil || len(matches) == 0 {
			t.Fatalf(".goreleaser.yaml archives %q, which names no file: %v", item, err)
		}
		for _, m := range matches {
			files = append(files, filepath.ToSlash(strings.TrimPrefix(m, "../../")))
		}
	}
	return files
}

// TestArchiveReadsOffline: the release archive's pages link only to
// pages it holds. The README sends a reader who unpacked it to the
// configuration, the MCP clients, the channels, ...: every page a page in
// the archive links to is in the archive too, so the README's links work
// in the unpacked directory, without the network. (Screenshots are not
// pages: a missing one leaves its caption.)
func TestArchiveReadsOffline(t *testing.T) {
	files := archivedFiles(t)
	for _, want := range []string{"README.md", "SECURITY.md", "docs/install.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("the archive lacks %s", want)
		}
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)`)
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			switch path.Ext(target) {
			case ".png", ".jpg", ".svg", ".gif":
				continue
			}
			p := path.Clean(path.Join(path.Dir(f), target))
			if !slices.Contains(files, p) {
				t.Errorf("%s links to %s, which the release archive does not hold (.goreleaser.yaml, archives' files)", f, p)
			}
		}
	}
}
