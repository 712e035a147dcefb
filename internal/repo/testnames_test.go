package repo

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the documentation a reader has: the README, SECURITY.md,
// CONTRIBUTING.md and docs/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md", "../../SECURITY.md", "../../CONTRIBUTING.md"}, docs...)
}

// testFuncs maps each test function of the repository to the directories
// (relative to its root, with slashes) whose _test.go files hold it.
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	funcs := map[string][]string{}
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel("../..", filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = append(funcs[string(m[1])], filepath.ToSlash(dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// TestPagesNameRealTests: a test the documentation names as the proof of
// what it says (`TestClusterRollingRestart`, `srv/cluster`
// `TestNoTokenInNATS`) is a test of the repository, in the package named
// beside it: a reader who runs it with -run finds it, rather than a name
// left behind when the test was renamed or moved.
func TestPagesNameRealTests(t *testing.T) {
	funcs := testFuncs(t)
	if len(funcs) == 0 {
		t.Fatal("found no test functions in the repository")
	}
	named := regexp.MustCompile("(?:`([a-z][a-z0-9_/.-]*)` )?`(Test[A-Za-z0-9_]+)`")
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../../")
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			pkg, test := m[1], m[2]
			dirs, ok := funcs[test]
			if !ok {
				t.Errorf("%s names %s, which is no test of the repository", name, test)
				continue
			}
			if info, err := os.Stat(filepath.Join("../..", pkg)); pkg == "" || err != nil || !info.IsDir() {
				continue // no package named beside it
			}
			found := false
			for _, d := range dirs {
				found = found || d == pkg
			}
			if !found {
				t.Errorf("%s names %s in %s; it is in %s", name, test, pkg, strings.Join(dirs, ", "))
			}
		}
	}
}
