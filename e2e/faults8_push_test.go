//go:build unix

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pushDouble is a Web Push service (RFC 8030) on an https loopback
// address, which the servers started after it trust (SSL_CERT_FILE). Each
// push is told on came, and answered with the status the test sends on
// the channel it carries.
type pushDouble struct {
	URL  string
	came chan pushed
}

type pushed struct {
	path   string
	answer chan int
}

func startPushDouble(t *testing.T) *pushDouble {
	t.Helper()
	d := &pushDouble{came: make(chan pushed)}
	done := make(chan struct{})
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pushed{path: r.URL.Path, answer: make(chan int, 1)}
		select {
		case d.came <- p:
		case <-done:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select {
		case code := <-p.answer:
			w.WriteHeader(code)
		case <-done:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() { close(done); ts.Close() })
	cert := filepath.Join(t.TempDir(), "push.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", cert) // the servers' trust, started after
	d.URL = ts.URL
	return d
}

// next is the next push the double is sent; it fails t unless it is to
// path.
func (d *pushDouble) next(t *testing.T, path string) pushed {
	t.Helper()
	select {
	case p := <-d.came:
		if p.path != path {
			t.Fatalf("a push to %s, want one to %s", p.path, path)
		}
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("no push to %s", path)
	}
	return pushed{}
}

// pushDevice is a browser's subscription at the double's path: its
// keys, as PushManager makes them.
func pushDevice(t *testing.T, d *pushDouble, path string) map[string]any {
	t.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return map[string]any{"endpoint": d.URL + path, "device": "Pixel 8 · Chrome",
		"keys": map[string]string{"p256dh": base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()),
			"auth": base64.RawURLEncoding.EncodeToString(auth)}}
}

// sendSubscription sends a device's subscription to s with method: its
// status and what s answered.
func sendSubscription(t *testing.T, s *server, method, path string, sub map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(sub)
	req, _ := http.NewRequest(method, s.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestFaults8PushGoneWhileRenewedElsewhere: a device's push service
// changes its subscription; its service worker renews it through B (PUT
// /push/subscriptions/{id}) while A, pushing a question to the old
// endpoint, is told 410 Gone. A has not heard the renewal yet (its link to
// NATS stalls: what NATS sends it is held, then caught up), so what it
// last heard still names the old endpoint. Its removal of the gone
// subscription must not remove the renewed one: the device would get no
// push again, from any instance, until it subscribed anew.
func TestFaults8PushGoneWhileRenewedElsewhere(t *testing.T) {
	dbl := startPushDouble(t)
	ns := natstest.Start(t)
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	config := "[push]\nallow_private_endpoints = true\n"
	a := startInstanceConfig(t, "nats://"+link.Addr(), "a", config)
	b := startInstanceConfig(t, ns.URL(), "b", config)
	room := store.Room(tokenA)

	code, out := sendSubscription(t, a, "POST", "/push/subscriptions", pushDevice(t, dbl, "/old"))
	if code != http.StatusCreated {
		t.Fatalf("subscribe through A: %d %v", code, out)
	}
	id, _ := out["id"].(string)
	ask := func(s *server, id, q string) {
		go func() { _, _ = connectAsk(t.Context(), s, id, q) }()
	}
	// B has heard of the subscription once it pushes to it.
	ask(b, "push-1", "Pushed by B?")
	dbl.next(t, "/old").answer <- http.StatusCreated

	ask(a, "push-2", "Pushed by A as the endpoint goes?")
	gone := dbl.next(t, "/old")
	link.SetHeld(true)
	code, out = sendSubscription(t, b, "PUT", "/push/subscriptions/"+id, pushDevice(t, dbl, "/new"))
	if code != http.StatusOK || out["changed"] != true {
		t.Fatalf("renew through B: %d %v", code, out)
	}
	gone.answer <- http.StatusGone
	// A reads the room's subscriptions to remove the gone one: released
	// once that read is on its way, it comes after the renewal.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := link.WaitHeld(ctx, "subs."+room); err != nil {
		t.Fatalf("A never read the subscriptions after the 410: %v", err)
	}
	link.SetHeld(false)
	// A logged the subscription when it kept it, and logs it again once
	// it has acted on the 410 (removed, or found renewed).
	if !a.logw.waitCount("subscription="+id, 2, 30*time.Second) {
		t.Fatal("A logged nothing of the 410")
	}

	js := jetStreamAt(t, ns.URL())
	kv, err := js.KeyValue(ctx, srvcluster.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "subs."+room)
	var subs []push.Subscription
	if err == nil {
		_ = json.Unmarshal(e.Value(), &subs)
	}
	if len(subs) != 1 || subs[0].ID != id || subs[0].Endpoint != dbl.URL+"/new" {
		t.Fatalf("the room's subscriptions after the 410 of the old endpoint and the renewal: %+v (%v), want %s at /new", subs, err, id)
	}
	ask(a, "push-3", "Pushed by A to the renewed endpoint?")
	dbl.next(t, "/new").answer <- http.StatusCreated
	t.Logf("push: 3 questions, 1 renewal through B, 1 410 at A with its link to NATS held; the renewed subscription kept")
}

// TestFaults8PushSubscribedAfterNATSRestart: NATS restarts (its data
// kept); once both instances are back, a device subscribes through B and
// a question is asked through A. A must push it to that device: it reads
// the subscriptions from its watch of them, which has to be watching
// again, not waiting for nats.go to notice its consumer is gone.
func TestFaults8PushSubscribedAfterNATSRestart(t *testing.T) {
	dbl := startPushDouble(t)
	ns := natstest.Start(t)
	config := "[push]\nallow_private_endpoints = true\n"
	a := startInstanceConfig(t, ns.URL(), "a", config)
	b := startInstanceConfig(t, ns.URL(), "b", config)

	ns.Restart()
	for _, s := range []*server{a, b} {
		if !s.logw.waitFor("watching the bucket again after NATS came back\" component=cluster bucket=agentassistant_requests", 30*time.Second) {
			t.Fatal("an instance did not watch the requests again after NATS restarted")
		}
	}
	// The watch of the subscriptions is made again with the others; a
	// question asked before that would find none (nor would any asked in
	// the 10 s or more nats.go takes to notice its consumer is gone).
	if !a.logw.waitFor("watching the bucket again after NATS came back\" component=cluster bucket=agentassistant_push", 30*time.Second) {
		t.Error("A did not watch the push subscriptions again after NATS restarted")
	}
	code, out := sendSubscription(t, b, "POST", "/push/subscriptions", pushDevice(t, dbl, "/after-restart"))
	if code != http.StatusCreated {
		t.Fatalf("subscribe through B: %d %v", code, out)
	}
	go func() { _, _ = connectAsk(t.Context(), a, "push-after-restart", "Pushed by A after NATS restarted?") }()
	dbl.next(t, "/after-restart").answer <- http.StatusCreated
	t.Logf("push: NATS restarted once; a subscription through B pushed to by A")
}

// TestFaults8PushAgainWhenTakenOver: A pushes a question to the device,
// the push service is busy (503), and A is killed (kill -9) before it
// tries again. The agent (agentassistant-mcp -server a,b) re-attaches
// through B, which takes the request over: B pushes it, under its tag
// (replacing a notification the device may have, without a second
// alert), so the person hears of the question the agent still waits on.
func TestFaults8PushAgainWhenTakenOver(t *testing.T) {
	dbl := startPushDouble(t)
	ns := natstest.Start(t)
	config := "[push]\nallow_private_endpoints = true\n"
	a := startInstanceConfig(t, ns.URL(), "a", config)
	b := startInstanceConfig(t, ns.URL(), "b", config)
	code, out := sendSubscription(t, b, "POST", "/push/subscriptions", pushDevice(t, dbl, "/device"))
	if code != http.StatusCreated {
		t.Fatalf("subscribe through B: %d %v", code, out)
	}
	agent := startMCP(t, a, tokenA, "-server", a.Host+":"+a.Port+","+b.Host+":"+b.Port)
	done := askAsync(agent, "Pushed though A died?")
	busy := dbl.next(t, "/device")
	a.kill9(t)
	busy.answer <- http.StatusServiceUnavailable

	select {
	case p := <-dbl.came:
		if p.path != "/device" {
			t.Fatalf("a push to %s", p.path)
		}
		p.answer <- http.StatusCreated
	case r := <-done:
		t.Fatalf("the agent's call ended: %+v %v", r.r, r.err)
	case <-time.After(45 * time.Second):
		t.Fatal("no instance pushed the question after A, which asked it, died while its push service was busy")
	}
	if !b.logw.waitFor("re-attached to a pending request", 10*time.Second) {
		t.Fatal("the agent did not re-attach through B")
	}
	t.Logf("push: 1 question, its instance killed -9 with the push service busy; pushed again by B, which took it over")
}
