package main

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// licenceName matches the files that carry a licence or a notice:
// LICENSE, LICENCE.md, LICENSE-MPL, COPYING, NOTICE, PATENTS,
// CopyrightNotice.txt, and the like; not code (license.go).
var licenceName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents|copyright|unlicense)[a-z]*([-._][a-z0-9._-]*)?$`)

var codeExt = []string{".go", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".json", ".vue", ".html", ".css", ".map"}

func isLicence(name string) bool {
	return licenceName.MatchString(name) && !slices.Contains(codeExt, strings.ToLower(filepath.Ext(name)))
}

// supplied are the texts of packages that ship none with them, each for
// the licence its package declares: should the declaration change, the
// text is checked again rather than kept.
var supplied = map[string]struct{ declared, file string }{
	// The Apache-2.0 text from the project's repository
	// (github.com/bufbuild/protobuf-es, LICENSE) and the BSD-3-Clause
	// notice of the Google code it includes (dist/esm/wire/varint.js).
	"@bufbuild/protobuf": {"(Apache-2.0 AND BSD-3-Clause)", "supplied/bufbuild-protobuf.txt"},
}

//go:embed supplied
var suppliedFS embed.FS

// collect finds each component's licence and notice files: in its root
// and in every directory from what was linked or bundled up to it. A
// component with none, and no supplied text, is an error naming it.
func collect(comps []component) ([]notice, error) {
	var notices []notice
	var missing []error
	for _, c := range comps {
		n := notice{component: c}
		seen := map[string]bool{}
		for _, d := range c.dirs {
			for {
				if !seen[d] {
					seen[d] = true
					files, err := licenceFiles(c.root, d)
					if err != nil {
						return nil, fmt.Errorf("%s %s %s: %w", c.kind, c.name, c.version, err)
					}
					n.files = append(n.files, files...)
				}
				if d == "." {
					break
				}
				d = filepath.Dir(d)
			}
		}
		if len(n.files) == 0 && c.kind == kindNPM {
			if s, ok := supplied[c.name]; ok {
				if s.declared != c.declared {
					return nil, fmt.Errorf("%s %s@%s: declares %s, the text supplied for it is for %s: check it", c.kind, c.name, c.version, c.declared, s.declared)
				}
				b, err := suppliedFS.ReadFile(s.file)
				if err != nil {
					return nil, fmt.Errorf("read supplied licence: %w", err)
				}
				n.files = append(n.files, licenceFile{name: "(supplied: ships no licence file)", text: string(b)})
			}
		}
		if len(n.files) == 0 {
			missing = append(missing, fmt.Errorf("%s %s %s (in %s): no licence file found", c.kind, c.name, c.version, c.root))
			continue
		}
		slices.SortFunc(n.files, func(a, b licenceFile) int { return strings.Compare(a.name, b.name) })
		notices = append(notices, n)
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	return notices, nil
}

// licenceFiles reads the licence files in dir, relative to root.
func licenceFiles(root, dir string) ([]licenceFile, error) {
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("read licence files: %w", err)
	}
	var out []licenceFile
	for _, e := range entries {
		if !e.Type().IsRegular() || !isLicence(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, dir, e.Name())) // #nosec G304 -- a licence file in the module cache or node_modules
		if err != nil {
			return nil, fmt.Errorf("read licence file: %w", err)
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			continue // an empty file tells nothing
		}
		out = append(out, licenceFile{name: filepath.ToSlash(filepath.Join(dir, e.Name())), text: string(b)})
	}
	return out, nil
}
