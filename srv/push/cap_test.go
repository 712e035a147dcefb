package push

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestSubscriptionsPerTokenUnderABurst: a token's devices subscribed to
// push are bounded (each question goes to every one of them, an HTTPS
// request each, and the file is written whole for each change). The
// bound was looked at before the new one was kept, apart, so a burst of
// subscriptions from a leaked token (200 at once) all saw room and all
// were kept. The bound is checked and taken in one step; past it 409,
// saying what to do; the same endpoint again replaces its own.
func TestSubscriptionsPerTokenUnderABurst(t *testing.T) {
	f := newFixture(t, Options{})
	d := newDevice(t, "/x")
	key := base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes())
	auth := base64.RawURLEncoding.EncodeToString(d.auth)
	post := func(i int) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]any{"endpoint": fmt.Sprintf("%s/dev/%d", f.s.URL, i),
			"keys": map[string]string{"p256dh": key, "auth": auth}, "device": fmt.Sprint("tab ", i)})
		rec := httptest.NewRecorder()
		f.p.Subscribe(tokA).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", bytes.NewReader(body)))
		return rec
	}
	const n = 200
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rec := post(i)
			codes[i] = rec.Code
			if rec.Code != http.StatusCreated && (rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "turn push off on one first")) {
				t.Errorf("subscription %d: %d %s", i, rec.Code, rec.Body)
			}
		})
	}
	wg.Wait()
	subs, err := f.subs.List(storeRoom(tokA))
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, c := range codes {
		if c == http.StatusCreated {
			created++
		}
	}
	if len(subs) != maxPerRoom || created != maxPerRoom {
		t.Fatalf("%d subscriptions kept and %d created from a burst of %d, want %d", len(subs), created, n, maxPerRoom)
	}
	again := strings.TrimPrefix(subs[0].Endpoint, f.s.URL+"/dev/")
	var i int
	fmt.Sscan(again, &i)
	if rec := post(i); rec.Code != http.StatusCreated {
		t.Errorf("a kept endpoint subscribing again: %d %s", rec.Code, rec.Body)
	}
	if rec := post(n); rec.Code != http.StatusConflict {
		t.Errorf("a new endpoint past the bound: %d %s", rec.Code, rec.Body)
	}
}
