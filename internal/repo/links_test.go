package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPagesLinkElsewhere: a page's link to a file goes to another page.
// A link from a page to itself by its file name ("docs/cluster.md has
// the measured figures", on docs/cluster.md) is a sentence carried over
// from the page that once sent readers there: it sends them to the top
// of the page they are reading. A place on the same page is linked by
// its anchor alone.
func TestPagesLinkElsewhere(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatchIndex(string(b), -1) {
			target := string(b[m[2]:m[3]])
			if strings.Contains(target, "://") {
				continue
			}
			if filepath.Clean(filepath.Join(filepath.Dir(page), target)) == filepath.Clean(page) {
				line := strings.Count(string(b[:m[0]]), "\n") + 1
				t.Errorf("%s:%d links to itself, %s", strings.TrimPrefix(page, "../../"), line, b[m[0]:m[1]])
			}
		}
	}
}
