package channel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestReceiverCannotRedirectTheNotice: a webhook's or ntfy's receiver
// that answers with a redirect (to a loopback service, a cloud's
// metadata address, anywhere the server reaches and the receiver does
// not) sends the notice nowhere else: the redirect is the send's
// failure, said with the status and the receiver's host alone, and the
// address it names is never asked, by POST (307, 308) nor by GET (301,
// 302, 303), whatever client the channel was given.
func TestReceiverCannotRedirectTheNotice(t *testing.T) {
	var inside atomic.Int32 // what reached the address redirected to
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		_, _ = io.WriteString(w, `{"AccessKeyId":"AKIA-metadata-secret"}`)
	}))
	t.Cleanup(internal.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, internal.URL+"/latest/meta-data/iam/security-credentials/", code)
		}))
		t.Cleanup(receiver.Close)
		url := receiver.URL + "/webhook/hook-id-secret-path"
		for _, c := range []struct {
			name string
			ch   Channel
		}{
			{"webhook", &Webhook{ID: "n8n", URL: url, Secret: "webhook-secret-s3", Token: tokA}},
			{"webhook with a client", &Webhook{ID: "n8n", URL: url, Secret: "webhook-secret-s3", Token: tokA,
				Client: &http.Client{Timeout: 20 * time.Second}}},
			{"ntfy", &Ntfy{URL: url, Topic: "t", AccessToken: "tk_ntfy-secret"}},
			{"ntfy with a client", &Ntfy{URL: url, Topic: "t", AccessToken: "tk_ntfy-secret", Client: &http.Client{Timeout: 20 * time.Second}}},
		} {
			t.Run(c.name+"/"+strconv.Itoa(code), func(t *testing.T) {
				before := inside.Load()
				err := c.ch.Send(context.Background(), Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(),
					Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?"}}})
				if n := inside.Load() - before; n != 0 {
					t.Fatalf("the address redirected to was asked %d times", n)
				}
				if err == nil {
					t.Fatal("a redirect was taken as delivered")
				}
				msg := err.Error()
				if !strings.Contains(msg, strconv.Itoa(code)) {
					t.Errorf("the error does not name the redirect: %s", msg)
				}
				for _, secret := range []string{"secret", "AKIA"} {
					if strings.Contains(msg, secret) {
						t.Errorf("the error shows %q: %s", secret, msg)
					}
				}
			})
		}
	}
}
