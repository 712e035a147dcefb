package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// sections splits the notices into each component's text, by its
// heading "name version (kind)".
func sections(t *testing.T, text []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	parts := strings.Split(string(text), rule+"\n")
	// parts: index, then heading and body in turn.
	for i := 1; i+1 < len(parts); i += 2 {
		out[strings.TrimSpace(parts[i])] = parts[i+1]
	}
	if len(out) == 0 {
		t.Fatalf("the notices have no sections:\n%.2000s", text)
	}
	return out
}

// rootLicences reads the licence files at the top of dir, as a reader
// of the module or package would find them.
func rootLicences(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range entries {
		u := strings.ToUpper(e.Name())
		if e.Type().IsRegular() && (strings.HasPrefix(u, "LICENSE") || strings.HasPrefix(u, "LICENCE") || strings.HasPrefix(u, "COPYING") || strings.HasPrefix(u, "NOTICE")) {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, strings.TrimSpace(strings.ReplaceAll(string(b), "\r\n", "\n")))
		}
	}
	return texts
}

// TestNoticesCoverBuiltBinaries: every module `go version -m` lists for
// the binaries, built as the release builds them, has its section in the
// notices, with the text of each licence file at the top of the module,
// and so has the Go toolchain. (The host's platform links a superset of
// the others' modules here; the generator lists every platform's.)
func TestNoticesCoverBuiltBinaries(t *testing.T) {
	ctx := context.Background()
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin+string(filepath.Separator), "./cmd/...")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bins, _ := filepath.Glob(filepath.Join(bin, "*"))
	if len(bins) < 3 {
		t.Fatalf("built %v, not the three binaries", bins)
	}
	out, err := exec.CommandContext(ctx, "go", append([]string{"version", "-m"}, bins...)...).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	// "\tdep\tpath\tversion\tsum", "\t=>\tpath\tversion\tsum" (a
	// replacement of the dep above it).
	deps := map[string]bool{}
	last := ""
	var goversion string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && strings.HasSuffix(f[0], ":") && strings.HasPrefix(f[1], "go"):
			goversion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			last = f[1] + " " + f[2]
			deps[last] = true
		case len(f) >= 3 && f[0] == "=>":
			delete(deps, last)
			deps[f[1]+" "+f[2]] = true
		}
	}
	if len(deps) < 10 || goversion == "" {
		t.Fatalf("go version -m lists %d modules and Go %q:\n%s", len(deps), goversion, out)
	}

	comps, err := goComponents(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	notices, err := collect(comps)
	if err != nil {
		t.Fatal(err)
	}
	got := sections(t, render(notices))

	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	checkSection(t, got, "Go "+goversion+" (Go toolchain)", filepath.Clean(strings.TrimSpace(string(goroot))))
	for dep := range deps {
		path, version, _ := strings.Cut(dep, " ")
		dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
		dl.Dir = root
		b, err := dl.Output()
		if err != nil {
			t.Fatalf("go mod download %s: %v", dep, err)
		}
		var m struct{ Dir string }
		if err := json.Unmarshal(b, &m); err != nil || m.Dir == "" {
			t.Fatalf("go mod download %s: %v %s", dep, err, b)
		}
		checkSection(t, got, dep+" (Go module)", m.Dir)
	}
}

// checkSection: the notices hold heading's section, with the text of
// every licence file at the top of dir, and dir has one.
func checkSection(t *testing.T, got map[string]string, heading, dir string) {
	t.Helper()
	body, ok := got[heading]
	if !ok {
		t.Errorf("the notices have no section %q", heading)
		return
	}
	texts := rootLicences(t, dir)
	if len(texts) == 0 {
		t.Errorf("%s: no licence file at the top of %s", heading, dir)
	}
	for _, text := range texts {
		if !strings.Contains(body, text) {
			t.Errorf("%s: the notices lack the licence text of %s (%.80q...)", heading, dir, text)
		}
	}
}

// TestNoticesCoverBundledPackages: every package the UI build says it
// bundled (.bundled/*.json, web/plugins/bundled.ts), the service
// worker's Workbox among them, has its section in the notices, with the
// licence files at the top of its directory in node_modules.
func TestNoticesCoverBundledPackages(t *testing.T) {
	ui := filepath.Join(root, "srv", "webui", "dist")
	lists, _ := filepath.Glob(filepath.Join(ui, ".bundled", "*.json"))
	if len(lists) == 0 {
		t.Skip("the UI is not built (make web): no .bundled lists in srv/webui/dist")
	}
	builds := map[string]int{}
	var want []struct{ heading, dir string }
	for _, f := range lists {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var l bundledList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Packages {
			builds[l.Build]++
			want = append(want, struct{ heading, dir string }{
				p.Name + " " + p.Version + " (npm package)",
				filepath.Join(root, "web", filepath.FromSlash(p.Dir)),
			})
		}
	}
	if builds["app"] == 0 || builds["sw"] == 0 {
		t.Fatalf("bundled packages per build: %v; the app's and the service worker's both bundle some", builds)
	}

	comps, err := npmComponents(ui, filepath.Join(root, "web"))
	if err != nil {
		t.Fatal(err)
	}
	notices, err := collect(comps)
	if err != nil {
		t.Fatal(err)
	}
	got := sections(t, render(notices))
	for _, w := range want {
		if s, ok := supplied[strings.SplitN(w.heading, " ", 2)[0]]; ok {
			text, _ := suppliedFS.ReadFile(s.file)
			if !strings.Contains(got[w.heading], strings.TrimSpace(string(text))) {
				t.Errorf("%s: the notices lack the text supplied for it", w.heading)
			}
			continue
		}
		checkSection(t, got, w.heading, w.dir)
	}
}

// TestMissingLicenceNamesIt: a module or package without a licence
// file, in its root or beside what was taken from it, fails the
// generator with its name; a licence in a directory nothing was taken
// from is not its licence.
func TestMissingLicenceNamesIt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bare/x.go", "package x")
	write("bare/license.go", "package x // not a licence")
	write("bare/LICENSE", " \n") // empty: tells nothing
	write("icons/index.js", "")
	write("icons/sets/a/LICENSE", "the icons' licence")
	write("icons/sets/b/LICENSE", "another set's licence")
	write("icons/sets/a/a.js", "")
	write("good/COPYING.md", "the good licence")

	comps := []component{
		{kind: kindModule, name: "example.com/bare", version: "v1.2.3", root: filepath.Join(dir, "bare"), dirs: []string{"."}},
		{kind: kindNPM, name: "icons", version: "1.0.0", root: filepath.Join(dir, "icons"), dirs: []string{"sets/a"}},
		{kind: kindNPM, name: "lonely", version: "2.0.0", root: filepath.Join(dir, "icons"), dirs: []string{"."}},
		{kind: kindModule, name: "example.com/good", version: "v0.1.0", root: filepath.Join(dir, "good"), dirs: []string{"."}},
	}
	_, err := collect(comps)
	if err == nil {
		t.Fatal("no error for components without a licence")
	}
	for _, name := range []string{"example.com/bare v1.2.3", "lonely 2.0.0"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	for _, name := range []string{"icons 1.0.0", "example.com/good"} {
		if strings.Contains(err.Error(), name) {
			t.Errorf("the error names %s, which has its licence: %v", name, err)
		}
	}

	notices, err := collect([]component{comps[1], comps[3]})
	if err != nil {
		t.Fatal(err)
	}
	text := render(notices)
	if !bytes.Contains(text, []byte("the icons' licence")) || bytes.Contains(text, []byte("another set's licence")) {
		t.Errorf("the icons' section takes the licence beside what was bundled, and only it:\n%s", text)
	}
}

// TestSuppliedTextFollowsTheDeclaration: a text supplied for a package
// that ships none is used only while the package declares the licence
// it was written for.
func TestSuppliedTextFollowsTheDeclaration(t *testing.T) {
	dir := t.TempDir()
	c := component{kind: kindNPM, name: "@bufbuild/protobuf", version: "9.0.0", root: dir, dirs: []string{"."}, declared: "MIT"}
	if _, err := collect([]component{c}); err == nil || !strings.Contains(err.Error(), "@bufbuild/protobuf") {
		t.Errorf("a changed declaration: %v", err)
	}
	c.declared = supplied[c.name].declared
	notices, err := collect([]component{c})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Copyright 2021-2025 Buf Technologies`).Match(render(notices)) {
		t.Error("the supplied text is not in the notices")
	}
}
