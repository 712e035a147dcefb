package answercap

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestAnswerBodyFailuresSayWhich: a body too large is 413; one that did
// not arrive in time is 408 (RFC 9110 15.5.9), not "too large": a
// client on a slow link is told to send it again, not to send less.
// Neither spends anything.
func TestAnswerBodyFailuresSayWhich(t *testing.T) {
	s := New()
	h := s.Answer(nil, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {})
	for _, c := range []struct {
		name string
		body io.Reader
		code int
		says string
	}{
		{"too large", strings.NewReader(`{"cap":"` + strings.Repeat("x", maxAnswer+1024) + `"}`), http.StatusRequestEntityTooLarge, "too large"},
		{"cut off", io.MultiReader(strings.NewReader(`{"cap":"`), iotest.ErrReader(os.ErrDeadlineExceeded)), http.StatusRequestTimeout, "did not arrive"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", c.body))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, rec.Code, rec.Body, c.code, c.says)
		}
	}
}
