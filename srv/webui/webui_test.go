package webui

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
