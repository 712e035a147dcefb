package channel

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestWebhookAnswerBodyFailuresSayWhich: a signed answer too large is
// 413; one that did not arrive in time is 408 (RFC 9110 15.5.9), not
// "too large": the sender on a slow link is told to send it again, not
// to send less.
func TestWebhookAnswerBodyFailuresSayWhich(t *testing.T) {
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	hook := &Webhook{ID: "n8n", Secret: "s3cret-s3cret-s3cret", Token: tokA}
	for _, c := range []struct {
		name string
		body io.Reader
		code int
		says string
	}{
		{"too large", strings.NewReader(`{"id":"` + strings.Repeat("x", maxSignedAnswer) + `"}`), http.StatusRequestEntityTooLarge, "too large"},
		{"cut off", io.MultiReader(strings.NewReader(`{"id":"`), iotest.ErrReader(os.ErrDeadlineExceeded)), http.StatusRequestTimeout, "did not arrive"},
	} {
		rec := httptest.NewRecorder()
		hook.Answers(h).ServeHTTP(rec, httptest.NewRequest("POST", "/channels/webhook/n8n/answer", c.body))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, rec.Code, rec.Body, c.code, c.says)
		}
	}
}
