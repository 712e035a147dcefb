package repo

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMENamesWhatTheTestsNeed: every Debian package .ci/run installs
// for the tests is in an `apt-get install` of README's quick start. A
// newcomer's `make test` without one skips the tests that need it, and
// the quick start is where they learn what to install.
func TestREADMENamesWhatTheTestsNeed(t *testing.T) {
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^for p in (.+); do$`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run: no `for p in COMMAND:PACKAGE ...; do` line naming what the tests need")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, install := range regexp.MustCompile("`apt-get install ([^`]+)`").FindAllSubmatch(readme, -1) {
		named = append(named, strings.Fields(string(install[1]))...)
	}
	for _, p := range strings.Fields(string(m[1])) {
		_, pkg, _ := strings.Cut(p, ":")
		found := false
		for _, n := range named {
			found = found || n == pkg
		}
		if !found {
			t.Errorf("README's quick start installs %v, not %s, which .ci/run installs for the tests", named, pkg)
		}
	}
}
