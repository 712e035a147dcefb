package webui

import (
	"os"
	"regexp"
	"testing"
)

// TestPagesAreTheAppsRoutes: every route the app picks a view by
// (web/src/App.vue) is served the page, or a reload of it would be a 404.
func TestPagesAreTheAppsRoutes(t *testing.T) {
	app, err := os.ReadFile("../../web/src/App.vue")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`route === '([^']+)'`).FindAllStringSubmatch(string(app), -1)
	if len(routes) == 0 {
		t.Fatal("no routes found in App.vue: this test reads them as `route === '/path'`")
	}
	for _, m := range routes {
		if !pages[m[1]] {
			t.Errorf("App.vue has the route %s, which the server does not serve as a page", m[1])
		}
	}
}
