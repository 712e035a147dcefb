package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// TestClientRoutesServeTheApp: the SPA's own routes (the booking host,
// the AG-UI demo) get the same page as /, with the same headers: no
// caching, no Referer (the token is in the URL), no framing, the CSP.
func TestClientRoutesServeTheApp(t *testing.T) {
	h := Handler()
	get := func(p string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec
	}
	root := get("/")
	if root.Code != http.StatusOK {
		t.Fatalf("/: %d", root.Code)
	}
	for _, p := range []string{"/booking", "/agui-demo?token=x&thread=demo", "/agui-demo/"} {
		rec := get(p)
		if rec.Code != http.StatusOK || rec.Body.String() != root.Body.String() {
			t.Errorf("%s: %d, the app's page: %v", p, rec.Code, rec.Body.String() == root.Body.String())
		}
		for _, k := range []string{"Content-Type", "Cache-Control", "Referrer-Policy", "X-Frame-Options", "Content-Security-Policy", "X-Content-Type-Options"} {
			if got, want := rec.Header().Get(k), root.Header().Get(k); got != want || got == "" {
				t.Errorf("%s: %s = %q, / has %q", p, k, got, want)
			}
		}
	}
}

// TestOnlyPagesAndFiles: a path that is neither a file of the build nor
// one of the app's pages is 404 (a missing script is not served as the
// page), a dot-path too; a method other than GET and HEAD on a page or a
// file is 405 with Allow.
func TestOnlyPagesAndFiles(t *testing.T) {
	build := fstest.MapFS{
		"index.html":          {Data: []byte("<!doctype html><title>app</title>")},
		"favicon.svg":         {Data: []byte("<svg/>")},
		"assets/index-abc.js": {Data: []byte("console.log(1)")},
		".gitkeep":            {},
	}
	srv := httptest.NewServer(handler(build))
	defer srv.Close()
	do := func(method, p string) (*http.Response, string) {
		req, _ := http.NewRequest(method, srv.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, p := range []string{"/", "/index.html", "/booking", "/booking/", "/agui-demo?token=x&thread=demo", "/agui-demo/"} {
		if resp, body := do(http.MethodGet, p); resp.StatusCode != http.StatusOK || !strings.Contains(body, "<title>app</title>") {
			t.Errorf("page %s: %d %q", p, resp.StatusCode, body)
		}
	}
	for p, ct := range map[string]string{"/favicon.svg": "image/svg+xml", "/assets/index-abc.js": "text/javascript"} {
		if resp, _ := do(http.MethodGet, p); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) {
			t.Errorf("file %s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/favicon.ico", "/assets/missing.js", "/.git/config", "/.gitkeep", "/debug/pprof/", "/booking/x", "/inbox", "/assets/", "/assets"} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			resp, body := do(m, p)
			if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "<title>app</title>") || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("%s %s: %d %s %q", m, p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: without the security headers", m, p)
			}
		}
	}
	for _, p := range []string{"/", "/booking", "/favicon.svg", "/assets/index-abc.js"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			if resp, _ := do(m, p); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d Allow %q", m, p, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
}

// TestInstallableAppFiles: the service worker is revalidated on every
// load (a new build's worker takes over at once), the manifest has its
// media type, and the CSP lets the page use both.
func TestInstallableAppFiles(t *testing.T) {
	build := fstest.MapFS{
		"index.html":           {Data: []byte("<!doctype html><title>app</title>")},
		"sw.js":                {Data: []byte("self.addEventListener('push', () => {})")},
		"manifest.webmanifest": {Data: []byte(`{"name":"agentassistant"}`)},
		"icons/icon-192.png":   {Data: []byte("\x89PNG\r\n\x1a\n")},
	}
	h := handler(build)
	get := func(p string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec
	}
	for p, want := range map[string][2]string{
		"/sw.js":                {"text/javascript", "no-cache"},
		"/manifest.webmanifest": {"application/manifest+json", "no-cache"},
		"/icons/icon-192.png":   {"image/png", "no-cache"},
	} {
		rec := get(p)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), want[0]) || rec.Header().Get("Cache-Control") != want[1] {
			t.Errorf("%s: %d %q %q, want %q %q", p, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"), want[0], want[1])
		}
	}
	csp := get("/").Header().Get("Content-Security-Policy")
	for _, d := range []string{"worker-src 'self'", "manifest-src 'self'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
}

// TestNotices: /notices serves the licences of what the binary holds
// (THIRD_PARTY_NOTICES.txt, written into the build by make notices) as
// plain text, revalidated like the service worker; a build without them
// has no /notices. The lists they were made from are not served.
func TestNotices(t *testing.T) {
	const text = "THIRD-PARTY NOTICES\n\nvue 3.5.45 (npm package)\n"
	build := fstest.MapFS{
		"index.html":              {Data: []byte("<!doctype html><title>app</title>")},
		"THIRD_PARTY_NOTICES.txt": {Data: []byte(text)},
		".bundled/app.json":       {Data: []byte(`{"build":"app"}`)},
	}
	for _, p := range []string{"/notices", "/notices/", "/THIRD_PARTY_NOTICES.txt"} {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			rec := httptest.NewRecorder()
			handler(build).ServeHTTP(rec, httptest.NewRequest(m, p, nil))
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || rec.Header().Get("Cache-Control") != "no-cache" {
				t.Errorf("%s %s: %d %q %q", m, p, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))
			}
			if m == http.MethodGet && rec.Body.String() != text {
				t.Errorf("%s %s: %q", m, p, rec.Body.String())
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: without the security headers", m, p)
			}
		}
	}
	for _, p := range []string{"/.bundled/app.json", "/.bundled/"} {
		rec := httptest.NewRecorder()
		handler(build).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
	delete(build, "THIRD_PARTY_NOTICES.txt")
	rec := httptest.NewRecorder()
	handler(build).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/notices", nil))
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "<title>app</title>") {
		t.Errorf("/notices of a build without them: %d %q", rec.Code, rec.Body.String())
	}
}
