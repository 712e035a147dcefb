package push

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

// TestSubscriptionBodyFailuresSayWhich: a body too large is 413; one
// that did not arrive in time is 408 (RFC 9110 15.5.9), not "too
// large": the page on a slow link is told to send it again, not to
// send less.
func TestSubscriptionBodyFailuresSayWhich(t *testing.T) {
	f := newFixture(t, Options{})
	for _, c := range []struct {
		name string
		body io.Reader
		code int
		says string
	}{
		{"too large", strings.NewReader(`{"endpoint":"` + strings.Repeat("x", maxRequest) + `"}`), http.StatusRequestEntityTooLarge, "too large"},
		{"cut off", io.MultiReader(strings.NewReader(`{"endpoint":"`), iotest.ErrReader(os.ErrDeadlineExceeded)), http.StatusRequestTimeout, "did not arrive"},
	} {
		rec := httptest.NewRecorder()
		f.p.Subscribe(tokA).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", c.body))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, rec.Code, rec.Body, c.code, c.says)
		}
	}
}
