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

// noticesFile is what `make notices` writes (internal/notices): the
// licences of the Go modules and npm packages the release ships.
const noticesFile = "THIRD_PARTY_NOTICES.txt"

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
		if !strings.HasPrefix(line, "      ") {
			break
		}
		item, ok := strings.CutPrefix(line, "      - ")
		if !ok {
			continue // the item's info
		}
		item = strings.TrimPrefix(strings.TrimSpace(item), "src: ")
		matches, err := filepath.Glob(filepath.Join("../..", item))
		if err == nil && len(matches) == 0 && item == noticesFile {
			// Written at release time (make notices), not committed.
			files = append(files, item)
			continue
		}
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

// TestArchiveReproducible: every entry of the release archives takes its
// owner, mode and time from the commit, none from the machine that built
// it. Unset, an archive carries the builder's user and the times its
// checkout was made, so the same commit built twice gives two archives
// and two checksums.txt, and nobody can check a download by rebuilding.
func TestArchiveReproducible(t *testing.T) {
	b, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, archives, ok := strings.Cut(string(b), "\narchives:\n")
	if !ok {
		t.Fatal(".goreleaser.yaml has no archives")
	}
	if i := regexp.MustCompile(`\n[a-z]`).FindStringIndex(archives); i != nil {
		archives = archives[:i[0]]
	}
	info := regexp.MustCompile(`(?m)^    builds_info: &info\n      owner: root\n      group: root\n      mode: 0o755\n      mtime: "\{\{ \.CommitDate \}\}"\n`)
	if !info.MatchString(archives) {
		t.Errorf("the archives' binaries do not take owner root, mode 0o755 and the commit's time (builds_info):\n%s", archives)
	}
	_, files, _ := strings.Cut(archives, "\n    files:\n")
	n := 0
	for line := range strings.Lines(files) {
		if !strings.HasPrefix(line, "      ") {
			break
		}
		if strings.HasPrefix(line, "      - ") {
			n++
			if !strings.HasPrefix(line, "      - src: ") {
				t.Errorf("archived file %s takes its owner and time from the checkout: give it info", strings.TrimSpace(line))
			}
		}
	}
	if n == 0 || strings.Count(files, "info: ") < n {
		t.Errorf("%d archived files, not each with info:\n%s", n, files)
	}
	// The binaries go into an archive in the order their builds end,
	// which parallel builds change from run to run.
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\t.*goreleaser release .*--parallelism 1\b`).Match(mk) {
		t.Error("make dist runs GoReleaser's builds in parallel: the binaries' order in an archive changes from run to run")
	}
}

// TestArchiveCarriesNotices: the archives carry the licences of the Go
// modules the binaries link and of the npm packages the UI bundles, as
// those licences ask: GoReleaser writes the file after the UI is built
// (the UI's build lists what it bundled) and puts it in every archive,
// and make build writes it before the binaries, whose server serves it
// at /notices. Without it the archives ship the code without its terms.
func TestArchiveCarriesNotices(t *testing.T) {
	if !slices.Contains(archivedFiles(t), noticesFile) {
		t.Errorf("the archives do not carry %s (.goreleaser.yaml, archives' files)", noticesFile)
	}
	b, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^before:\n  hooks:\n    - make web\n(?:    #.*\n)*    - make notices\n`).Match(b) {
		t.Error(".goreleaser.yaml's before hooks do not run make notices after make web")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^NOTICES\s*:?=.*\./internal/notices\b`).Match(mk) ||
		!regexp.MustCompile(`(?m)^notices:.*\n\t\$\(NOTICES\)`).Match(mk) ||
		!regexp.MustCompile(`(?m)^build: web\n\t\$\(NOTICES\)\n\t\$\(GO\) build`).Match(mk) {
		t.Error("the Makefile has no notices target running ./internal/notices, or make build does not run it before go build")
	}
	ignore, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(ignore)), "/"+noticesFile) {
		t.Errorf(".gitignore does not keep the generated /%s out of the repository", noticesFile)
	}
}
