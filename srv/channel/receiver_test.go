package channel

import (
	"context"
	"fmt"
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

// TestReceiverAnswerIsBounded: a receiver that answers a notice with
// gigabytes, refusing it or taking it, costs what the error tells (512
// bytes) and the connection's buffers, not its answer: the send ends
// once those are read, and the error does not say the receiver's path.
func TestReceiverAnswerIsBounded(t *testing.T) {
	const answer = 3 << 30
	for _, code := range []int{http.StatusOK, http.StatusInternalServerError} {
		var written atomic.Int64
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			buf := []byte(strings.Repeat("refused ", 8192))
			for written.Load() < answer {
				n, err := w.Write(buf)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}))
		t.Cleanup(receiver.Close)
		hook := &Webhook{ID: "n8n", URL: receiver.URL + "/webhook/hook-id-secret-path", Secret: "webhook-secret-s3", Token: tokA}
		err := hook.Send(context.Background(), Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(),
			Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?"}}})
		receiver.CloseClientConnections()
		if n := written.Load(); n >= 64<<20 {
			t.Errorf("%d: the receiver's answer was read past %d MiB", code, n>>20)
		}
		switch {
		case code == http.StatusOK && err != nil:
			t.Errorf("a notice taken (200) is an error: %v", err)
		case code != http.StatusOK && (err == nil || len(err.Error()) > 600 || strings.Contains(err.Error(), "hook-id")):
			t.Errorf("%d: the error is %d bytes: %.100v", code, len(fmt.Sprint(err)), err)
		}
	}
}
