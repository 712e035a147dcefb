package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A target is one platform of the release.
type target struct{ goos, goarch string }

// releaseBuilds reads from .goreleaser.yaml the mains it builds and the
// platforms it builds them for, so the notices follow the release.
func releaseBuilds(root string) (mains []string, targets []target, err error) {
	b, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml")) // #nosec G304 -- the repository's own release config
	if err != nil {
		return nil, nil, fmt.Errorf("read release config: %w", err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+main:\s*(\S+)\s*$`).FindAllSubmatch(b, -1) {
		mains = append(mains, string(m[1]))
	}
	list := func(key string) []string {
		m := regexp.MustCompile(`(?m)^\s+` + key + `:\s*\[([^\]]*)\]`).FindSubmatch(b)
		if m == nil {
			return nil
		}
		var out []string
		for v := range strings.SplitSeq(string(m[1]), ",") {
			out = append(out, strings.TrimSpace(v))
		}
		return out
	}
	for _, goos := range list("goos") {
		for _, goarch := range list("goarch") {
			targets = append(targets, target{goos, goarch})
		}
	}
	if len(mains) == 0 || len(targets) == 0 {
		return nil, nil, errors.New("read release config: .goreleaser.yaml names no main, goos or goarch")
	}
	return mains, targets, nil
}

// listed is what go list -json says of a package.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *listedModule
}

type listedModule struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *listedModule
}

// goComponents are the Go toolchain (its standard library is in every
// binary) and every module a release binary links, with the directories
// of the packages it links, over all the release's platforms.
func goComponents(ctx context.Context, root string) ([]component, error) {
	mains, targets, err := releaseBuilds(root)
	if err != nil {
		return nil, err
	}
	goroot, err := goEnv(ctx, root, "GOROOT")
	if err != nil {
		return nil, err
	}
	goversion, err := goEnv(ctx, root, "GOVERSION")
	if err != nil {
		return nil, err
	}
	byPath := map[string]*component{}
	for _, t := range targets {
		cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-json=ImportPath,Dir,Standard,Module"}, mains...)...) // #nosec G204 -- go itself, on the release config's mains
		cmd.Dir = root
		// As .goreleaser.yaml builds them: no cgo.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.goos, "GOARCH="+t.goarch, "GOFLAGS=-mod=readonly")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("list packages for %s/%s: %w: %s", t.goos, t.goarch, err, stderr.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listed
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("read go list: %w", err)
			}
			if p.Standard || p.Module == nil || p.Module.Main {
				continue
			}
			m := p.Module
			if m.Replace != nil {
				m = m.Replace
			}
			if m.Dir == "" {
				return nil, fmt.Errorf("module %s %s: not in the module cache (go mod download)", m.Path, m.Version)
			}
			key := m.Path + " " + m.Version
			c := byPath[key]
			if c == nil {
				c = &component{kind: kindModule, name: m.Path, version: m.Version, root: m.Dir}
				byPath[key] = c
			}
			rel, err := filepath.Rel(m.Dir, p.Dir)
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("package %s: %s is not in its module's %s", p.ImportPath, p.Dir, m.Dir)
			}
			if !slices.Contains(c.dirs, rel) {
				c.dirs = append(c.dirs, rel)
			}
		}
	}
	comps := []component{{kind: kindGo, name: "Go", version: goversion, root: goroot, dirs: []string{"."}}}
	for _, c := range byPath {
		slices.Sort(c.dirs)
		comps = append(comps, *c)
	}
	slices.SortFunc(comps[1:], func(a, b component) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.version, b.version))
	})
	return comps, nil
}

func goEnv(ctx context.Context, root, key string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", key) // #nosec G204 -- go itself, a fixed key
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}
