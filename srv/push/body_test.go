package push

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// cutBody gives a little of a body, then fails as a body cut off at the
// server's body deadline does.
type cutBody struct{ r io.Reader }

func (b *cutBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, os.ErrDeadlineExceeded
}

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
		{"cut off", &cutBody{strings.NewReader(`{"endpoint":"`)}, http.StatusRequestTimeout, "did not arrive"},
	} {
		rec := httptest.NewRecorder()
		f.p.Subscribe(tokA).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", c.body))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, rec.Code, rec.Body, c.code, c.says)
		}
	}
}
