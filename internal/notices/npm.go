package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// bundledList is what web/plugins/bundled.ts writes for a build.
type bundledList struct {
	Build    string `json:"build"`
	Packages []struct {
		Name    string   `json:"name"`
		Version string   `json:"version"`
		Dir     string   `json:"dir"`
		Dirs    []string `json:"dirs"`
	} `json:"packages"`
}

// npmComponents are the packages the UI build in ui recorded in its
// .bundled lists (the app's and the service worker's), found in web's
// node_modules.
func npmComponents(ui, web string) ([]component, error) {
	lists, err := filepath.Glob(filepath.Join(ui, ".bundled", "*.json"))
	if err != nil {
		return nil, fmt.Errorf("find bundled lists: %w", err)
	}
	if len(lists) == 0 {
		return nil, fmt.Errorf("find bundled lists: none in %s: build the UI first (make web)", filepath.Join(ui, ".bundled"))
	}
	byDir := map[string]*component{}
	for _, f := range lists {
		b, err := os.ReadFile(f) // #nosec G304 -- a list the UI build wrote
		if err != nil {
			return nil, fmt.Errorf("read bundled list: %w", err)
		}
		var l bundledList
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("read bundled list %s: %w", f, err)
		}
		for _, p := range l.Packages {
			if !filepath.IsLocal(filepath.FromSlash(p.Dir)) {
				return nil, fmt.Errorf("read bundled list %s: %s's directory %q is outside %s", f, p.Name, p.Dir, web)
			}
			c := byDir[p.Dir]
			if c == nil {
				root := filepath.Join(web, filepath.FromSlash(p.Dir))
				var meta struct {
					Name, Version string
					License       json.RawMessage
				}
				b, err := os.ReadFile(filepath.Join(root, "package.json")) // #nosec G304 -- a package in node_modules
				if err != nil {
					return nil, fmt.Errorf("npm package %s@%s: %w", p.Name, p.Version, err)
				}
				if err := json.Unmarshal(b, &meta); err != nil {
					return nil, fmt.Errorf("npm package %s@%s: read package.json: %w", p.Name, p.Version, err)
				}
				// The build and node_modules must agree, or the text would
				// be another version's.
				if meta.Name != p.Name || meta.Version != p.Version {
					return nil, fmt.Errorf("npm package %s@%s: %s holds %s@%s: rebuild the UI (make web)", p.Name, p.Version, root, meta.Name, meta.Version)
				}
				var declared string
				if json.Unmarshal(meta.License, &declared) != nil {
					declared = string(meta.License)
				}
				c = &component{kind: kindNPM, name: p.Name, version: p.Version, root: root, declared: declared}
				byDir[p.Dir] = c
			}
			for _, d := range p.Dirs {
				d = filepath.FromSlash(d)
				if !filepath.IsLocal(d) && d != "." {
					return nil, fmt.Errorf("read bundled list %s: %s's directory %q is outside it", f, p.Name, d)
				}
				if !slices.Contains(c.dirs, d) {
					c.dirs = append(c.dirs, d)
				}
			}
		}
	}
	var comps []component
	for _, c := range byDir {
		slices.Sort(c.dirs)
		comps = append(comps, *c)
	}
	slices.SortFunc(comps, func(a, b component) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.version, b.version), cmp.Compare(a.root, b.root))
	})
	return comps, nil
}
