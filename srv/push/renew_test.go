package push

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// renew puts the device's subscription, as its service worker does
// after pushsubscriptionchange, under id for token.
func (d *device) renew(t *testing.T, p *Pusher, s *service, token, id string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"endpoint": s.URL + d.path,
		"keys": map[string]string{"p256dh": base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
			"auth": base64.RawURLEncoding.EncodeToString(d.auth)},
	})
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("PUT", "/push/subscriptions/"+id, bytes.NewReader(body))
	r.SetPathValue("id", id)
	p.Renew(token).ServeHTTP(rec, r)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

// TestRenewedSubscriptionGetsThePushes: the push service changed the
// device's subscription (pushsubscriptionchange); the renewal keeps its
// ID, device name and replies with the new endpoint and keys, and the
// next push goes there, even with the old endpoint's sender still
// running, and not to the old one. The old endpoint calling its last
// push gone removes nothing: the subscription lives on at the new one.
// Another token cannot renew it, nor can one that has no such ID.
func TestRenewedSubscriptionGetsThePushes(t *testing.T) {
	f := newFixture(t, Options{})
	f.s.status = func(path string, _ int) int {
		if path == "/hang/old" {
			return http.StatusGone
		}
		return http.StatusCreated
	}
	old, renewed := newDevice(t, "/hang/old"), newDevice(t, "/new")
	id := old.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Firefox", "Ship it", "Hold on")
	oldKey := senderKey(mustList(t, f.subs, tokA)[0])
	f.ask(tokA, "q-1", "Before the change?")
	// The push is the old endpoint's sender's, which the push service
	// holds until the renewal is made, and then calls gone.
	waitUntil(t, func() bool {
		f.p.mu.Lock()
		defer f.p.mu.Unlock()
		return f.p.senders[oldKey] != nil
	})

	if code, _ := renewed.renew(t, f.p, f.s, tokB, id); code != http.StatusNotFound {
		t.Errorf("another token's renewal: %d, want 404", code)
	}
	if code, _ := renewed.renew(t, f.p, f.s, tokA, "no-such-id"); code != http.StatusNotFound {
		t.Errorf("an unknown ID's renewal: %d, want 404", code)
	}
	code, out := renewed.renew(t, f.p, f.s, tokA, id)
	if code != http.StatusOK || out["id"] != id || out["changed"] != true {
		t.Fatalf("renew: %d %v", code, out)
	}
	if code, out := renewed.renew(t, f.p, f.s, tokA, id); code != http.StatusOK || out["changed"] != false {
		t.Errorf("the same again: %d %v, want changed false", code, out)
	}
	subs, _ := f.subs.List(storeRoom(tokA))
	if len(subs) != 1 || subs[0].ID != id || subs[0].Endpoint != f.s.URL+"/new" || subs[0].Device != "Pixel 8 · Firefox" || len(subs[0].Replies) != 2 {
		t.Fatalf("subscriptions: %+v", subs)
	}

	close(f.s.hold)
	f.s.waitFor(t, "/hang/old", 1)
	f.ask(tokA, "q-2", "After the change?")
	got := renewed.open(t, f.s, f.s.waitFor(t, "/new", 1)[0])
	if got.msg.ID != "q-2" || got.msg.Sub != "" && got.msg.Sub != id || len(got.msg.Actions) != 2 || got.msg.Actions[0] != "Ship it" {
		t.Errorf("the renewed device got %+v", got.msg)
	}
	f.s.mu.Lock()
	n := len(f.s.got["/hang/old"])
	f.s.mu.Unlock()
	if n != 1 {
		t.Errorf("the old endpoint got %d pushes, want the one before the change", n)
	}
	// The old sender ends on the 410: the subscription is still the new
	// endpoint's.
	waitUntil(t, func() bool {
		f.p.mu.Lock()
		defer f.p.mu.Unlock()
		return f.p.senders[oldKey] == nil
	})
	if subs := mustList(t, f.subs, tokA); len(subs) != 1 || subs[0].Endpoint != f.s.URL+"/new" {
		t.Errorf("after the old endpoint's 410: %+v", subs)
	}
}

func mustList(t *testing.T, subs Subscriptions, token string) []Subscription {
	t.Helper()
	l, err := subs.List(storeRoom(token))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitUntil waits for ok to hold, looking again as the goroutines run.
func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("not reached in 10 s")
		}
	}
}
