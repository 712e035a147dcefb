package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureMap keeps docs/architecture.md true: its package table
// names every package of the module (but gen/, the bench and the
// end-to-end tests), and no other, with exactly what it imports of the
// module, and its
// paragraph on the hub and the relay names each of their files.
func TestArchitectureMap(t *testing.T) {
	const module = "github.com/agentassistant/agentassistant/"
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if strings.HasPrefix(pkg, "gen/") || pkg == "bench" || pkg == "e2e" {
			continue
		}
		var own []string
		for _, imp := range f[1:] {
			if p, ok := strings.CutPrefix(imp, module); ok && !strings.HasPrefix(p, "gen/") {
				own = append(own, p)
			}
		}
		slices.Sort(own)
		imports[pkg] = own
	}

	quoted := regexp.MustCompile("`([^`]+)`")
	names := func(cell string) (out []string) {
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	listed := map[string]bool{}
	for line := range strings.Lines(section(t, "Packages")) {
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if len(cells) != 3 || !strings.HasPrefix(cells[0], "| `") {
			continue
		}
		pkgs := names(cells[0])
		var want []string
		for _, p := range pkgs {
			if _, ok := imports[p]; !ok {
				t.Errorf("docs/architecture.md's package table has a row for %s, which is no package of the module", p)
			}
			listed[p] = true
			want = append(want, imports[p]...)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		got := names(cells[2])
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md says %v import %v; they import %v", pkgs, got, want)
		}
	}
	for p := range imports {
		if !listed[p] {
			t.Errorf("docs/architecture.md's package table has no row for %s", p)
		}
	}

	para := string(doc)
	if i := strings.Index(para, "The hub and the relay keep one idea per file"); i >= 0 {
		para = para[i:]
		para = para[:strings.Index(para, "\n\n")]
	}
	for _, dir := range []string{"srv/hub", "srv/relay"} {
		files := sources(t, dir)
		pkgDoc := packageDoc(t, files)
		for name := range files {
			if !strings.Contains(para, "`"+name+"`") {
				t.Errorf("docs/architecture.md does not say what %s/%s holds", dir, name)
			}
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(pkgDoc) {
				t.Errorf("the package comment of %s does not say what %s holds", dir, name)
			}
		}
	}
}

// sources are the Go files of dir (relative to the repository's root)
// but its tests, by name.
func sources(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	src := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src[filepath.Base(f)] = string(b)
	}
	return src
}

// packageDoc is the package comment found among files (sources).
func packageDoc(t *testing.T, files map[string]string) string {
	t.Helper()
	for _, s := range files {
		if i := strings.Index(s, "// Package "); i >= 0 {
			if j := strings.Index(s[i:], "\npackage "); j >= 0 {
				return s[i : i+j]
			}
		}
	}
	t.Fatalf("no package comment among %d files", len(files))
	return ""
}
