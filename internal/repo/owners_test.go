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

// section is the text of docs/architecture.md from the heading named to
// the next heading of its level.
func section(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/architecture.md has no section %q", heading)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

// startsGoroutine finds, in a file's code, what starts a goroutine or
// arms a timer whose function runs on one.
var startsGoroutine = regexp.MustCompile(`(?m)(\bgo func\(|^\s*go [\w.]+\(|\.Go\(|time\.AfterFunc\()`)

// TestGoroutineOwnersMapped keeps the goroutine table of
// docs/architecture.md whole: every file of the module that one of the
// three binaries links, and that starts a goroutine (go, a group's Go,
// time.AfterFunc), is named in that section as dir/file.go (its
// package's last element and its name), so a contributor who meets a
// goroutine finds its owner there.
func TestGoroutineOwnersMapped(t *testing.T) {
	const module = "github.com/agentassistant/agentassistant/"
	sec := section(t, "Goroutines and their owners")
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Dir}} {{join .GoFiles \" \"}}", "../../cmd/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var checked int
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if !strings.HasPrefix(f[0], module) || strings.HasPrefix(f[0], module+"gen/") {
			continue
		}
		for _, name := range f[2:] {
			b, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			if !startsGoroutine.Match(b) {
				continue
			}
			checked++
			want := filepath.Base(f[1]) + "/" + name
			named := regexp.MustCompile("`[^`\n]*\\b" + regexp.QuoteMeta(want) + "`")
			if !named.MatchString(sec) {
				rel := strings.TrimPrefix(f[0], module)
				t.Errorf("%s/%s starts a goroutine; docs/architecture.md's goroutine table names no `%s`", rel, name, want)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no file starts a goroutine: the search is wrong")
	}
}

// TestLockOrderCheckedWhereSaid keeps the lock order's "Checked"
// paragraph true: the packages it says turn the check on in their
// TestMain are those whose tests call lockorder.Main.
func TestLockOrderCheckedWhereSaid(t *testing.T) {
	sec := section(t, "Lock order")
	i := strings.Index(sec, "`TestMain` of ")
	j := strings.Index(sec[max(i, 0):], "turns the check on")
	if i < 0 || j < 0 {
		t.Fatal("docs/architecture.md's lock order no longer says which packages' TestMain turns the check on")
	}
	var said []string
	for _, m := range regexp.MustCompile("`([a-z/]+)`").FindAllStringSubmatch(sec[i+len("`TestMain` of "):i+j], -1) {
		said = append(said, m[1])
	}
	slices.Sort(said)

	var calls []string
	err := filepath.WalkDir("../../srv", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "lockorder.Main(") {
			rel, _ := filepath.Rel("../..", filepath.Dir(p))
			calls = append(calls, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(calls)
	calls = slices.Compact(calls)
	if !slices.Equal(said, calls) {
		t.Errorf("docs/architecture.md says the TestMain of %v turns the lock order's check on; lockorder.Main is called in %v", said, calls)
	}
}
