package repo

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goSource is the module's Go code but its tests and gen/, by package
// directory (relative, with slashes).
func goSource(t *testing.T) map[string]string {
	t.Helper()
	src := map[string]string{}
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "gen" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel("../..", filepath.Dir(p))
		src[filepath.ToSlash(dir)] += string(b) + "\n"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// declares says whether code declares name: a function, a type, a
// method (of recv, when given), a field or an interface's method, a
// variable or a constant.
func declares(code, recv, name string) bool {
	n := regexp.QuoteMeta(name)
	if recv != "" {
		r := regexp.QuoteMeta(recv)
		return regexp.MustCompile(`func \(\w+ \*?`+r+`(\[[^\]]*\])?\) `+n+`[\[(]`).MatchString(code) ||
			regexp.MustCompile(`(?s)type `+r+`\b[^{]*\{[^}]*\n\s+`+n+`\b`).MatchString(code)
	}
	return regexp.MustCompile(`(?m)(^func (\([^)]*\) )?` + n + `[\[(]|^type ` + n + `\b|^\s+` + n + `\b( |\(|,)|^(var|const) ` + n + `\b|"` + n + `")`).MatchString(code)
}

// TestContributingNamesWhatExists keeps CONTRIBUTING.md's recipes true:
// each name it gives in backquotes is still there. A path is a file or
// directory of the repository (or a standard package); /path a route
// srv serves; a name with a dash a command of cmd/; pkg.Name a
// declaration of that package of the module, pkg.Type.Method its
// method; Type.Method a method somewhere in the module; a bare Go name
// a declaration somewhere in it. A renamed function, a moved file or a
// package gone fails it, naming what to put right.
func TestContributingNamesWhatExists(t *testing.T) {
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatalf("the how-to for a new tool, channel or door: %v", err)
	}
	src := goSource(t)
	byName := map[string][]string{} // a package's last element: its directories
	for dir := range src {
		byName[filepath.Base(dir)] = append(byName[filepath.Base(dir)], dir)
	}
	anywhere := func(recv, name string) bool {
		for _, code := range src {
			if declares(code, recv, name) {
				return true
			}
		}
		return false
	}
	inPackage := func(pkg, recv, name string) bool {
		for _, dir := range byName[pkg] {
			if declares(src[dir], recv, name) {
				return true
			}
		}
		return false
	}
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	quoted := regexp.MustCompile("`([^`\n]+)`")
	var checked int
	for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
		name := m[1]
		parts := strings.Split(name, ".")
		switch {
		case strings.ContainsAny(name, " :=") || strings.HasPrefix(name, "Test"):
			continue // a command, a subject line; tests: TestPagesNameRealTests
		case strings.HasPrefix(name, "/"):
			route := regexp.MustCompile(`["\s]` + regexp.QuoteMeta(name) + `["\s{/]`)
			if !route.MatchString(src["srv"]) {
				t.Errorf("CONTRIBUTING.md names the route %s, which srv does not serve", name)
			}
		case strings.Contains(name, "/") || strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".proto"):
			if _, err := os.Stat(filepath.Join("../..", name)); err == nil {
				break
			}
			if exec.Command("go", "list", name).Run() == nil {
				break // a standard package
			}
			t.Errorf("CONTRIBUTING.md names %s, which is no file, directory or package", name)
		case len(parts) == 1 && !ident.MatchString(name):
			if _, err := os.Stat(filepath.Join("../../cmd", name)); err != nil {
				t.Errorf("CONTRIBUTING.md names %s, which is no command of cmd/", name)
			}
		case len(parts) == 1:
			if info, err := os.Stat(filepath.Join("../..", name)); err == nil && info.IsDir() {
				break
			}
			if len(byName[name]) == 0 && !anywhere("", name) {
				t.Errorf("CONTRIBUTING.md names %s, which nothing in the module declares", name)
			}
		case len(parts) == 2 && len(byName[parts[0]]) > 0:
			if !inPackage(parts[0], "", parts[1]) {
				t.Errorf("CONTRIBUTING.md names %s: package %s declares no %s", name, parts[0], parts[1])
			}
		case len(parts) == 2:
			if !anywhere(parts[0], parts[1]) {
				t.Errorf("CONTRIBUTING.md names %s: no type %s of the module has %s", name, parts[0], parts[1])
			}
		case len(parts) == 3 && len(byName[parts[0]]) > 0:
			if !inPackage(parts[0], "", parts[1]) || !inPackage(parts[0], parts[1], parts[2]) {
				t.Errorf("CONTRIBUTING.md names %s: package %s has no %s with %s", name, parts[0], parts[1], parts[2])
			}
		default:
			t.Errorf("CONTRIBUTING.md names %s, which this test cannot check: write it as a path, pkg.Name or Type.Method", name)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("CONTRIBUTING.md names %d things; its recipes name the files and types a change touches", checked)
	}
}
