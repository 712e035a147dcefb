package main

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pushDevice is a browser's side of a push subscription: a P-256 key
// pair and an auth secret (RFC 8291), and the endpoint path the push
// service double takes its pushes at.
type pushDevice struct {
	key  *ecdh.PrivateKey
	auth []byte
	path string
	got  *arrivals
}

func newPushDevice(path string) (*pushDevice, error) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &pushDevice{key: key, auth: auth, path: path, got: newArrivals()}, nil
}

func (d *pushDevice) keys() webpush.Keys {
	return webpush.Keys{P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(d.auth)}
}

// open decrypts a push sent to d (RFC 8291's aes128gcm, one record), as
// its browser would.
func (d *pushDevice) open(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("push: shorter than its header")
	}
	salt, idLen := body[:16], int(body[20])
	if len(body) < 21+idLen {
		return nil, errors.New("push: shorter than its key ID")
	}
	serverKey, err := ecdh.P256().NewPublicKey(body[21 : 21+idLen])
	if err != nil {
		return nil, fmt.Errorf("push: the server's key: %w", err)
	}
	shared, err := d.key.ECDH(serverKey)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), d.key.PublicKey().Bytes()...), serverKey.Bytes()...)
	prkKey, err := hkdf.Extract(sha256.New, shared, d.auth)
	if err != nil {
		return nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, body[21+idLen:], nil)
	if err != nil {
		return nil, fmt.Errorf("push: does not decrypt for its device: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("push: no last-record delimiter")
	}
	return plain[:len(plain)-1], nil
}

// pushStep: the time from ask_question until the push service has the
// push for the last of 1, 10 and 100 subscribed devices, beside the
// inbox's own delivery from the same server and the floor: webpush-go
// sending a push of the same size to the same number of devices from
// this process, one goroutine each, as the server does. The push
// service is a TLS double in this process, which the server trusts
// through SSL_CERT_FILE.
func pushStep(ctx context.Context, c config, r *report) error {
	svc := newHTTPReceiver(201, true)
	defer svc.Close()
	dir, err := os.MkdirTemp("", "aa-bench-push-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ca := filepath.Join(dir, "push-service.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: svc.Certificate().Raw}), 0o600); err != nil {
		return err
	}
	vapidPriv, vapidPub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return err
	}
	for _, n := range c.pushDevices {
		if err := pushDevices(ctx, c, r, svc, ca, vapidPub, vapidPriv, n); err != nil {
			return fmt.Errorf("%d devices: %w", n, err)
		}
	}
	return nil
}

func pushDevices(ctx context.Context, c config, r *report, svc *httpReceiver, ca, vapidPub, vapidPriv string, n int) error {
	devs := make([]*pushDevice, n)
	floorDevs := make([]*pushDevice, n)
	for i := range n {
		var err error
		if devs[i], err = newPushDevice(fmt.Sprintf("/push/%d/d%d", n, i)); err != nil {
			return err
		}
		if floorDevs[i], err = newPushDevice(fmt.Sprintf("/floor/%d/d%d", n, i)); err != nil {
			return err
		}
		svc.route(devs[i].path, devs[i].got)
		svc.route(floorDevs[i].path, floorDevs[i].got)
	}
	// The devices' subscriptions, kept in the server's data directory by
	// the server's own code: the app's POST /push/subscriptions takes at
	// most 32 devices a token, so 100 are written before it starts.
	prepare := func(data, token string) error {
		subs, err := push.OpenFileSubscriptions(data)
		if err != nil {
			return err
		}
		for i, d := range devs {
			k := d.keys()
			if err := subs.Put(store.Room(token), push.Subscription{ID: fmt.Sprint("d", i), Endpoint: svc.URL + d.path,
				P256dh: k.P256dh, Auth: k.Auth, Device: fmt.Sprintf("Device %d · Chrome", i), Replies: []string{"Yes", "No", "Go ahead"}, Created: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	}
	// The push service double is on this machine, where the server pushes
	// only when told it may.
	s, err := startServerWith(c, serverExtras{prepare: prepare, env: []string{"SSL_CERT_FILE=" + ca},
		config: "\n[push]\nallow_private_endpoints = true\n"})
	if err != nil {
		return err
	}
	defer s.stop()
	var inbox receipts
	if _, err := dialWS(ctx, s, "inbox", func(_ *wsClient, m *pb.WebsocketMessage) {
		if m.Cmd == "AskQuestion" {
			inbox.note()
		}
	}); err != nil {
		return err
	}
	hc := httpClient()
	ask := agentassistprotoconnect.NewSrvAgentAssistClient(hc, s.url)
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(hc, s.url)
	// lastOf waits for the k-th push of every device of ds and returns
	// when the last of them came.
	lastOf := func(ds []*pushDevice, k int) (time.Time, error) {
		var last time.Time
		for _, d := range ds {
			at, _, err := d.got.nth(ctx, "push service, "+d.path, k)
			if err != nil {
				return time.Time{}, err
			}
			if at.After(last) {
				last = at
			}
		}
		return last, nil
	}
	floorClient := svc.Client()
	const warm = 2
	var ds, inboxDs, floorDs []time.Duration
	var conns, floorConns int64 // the connections the measured pushes opened
	for q := 1; q <= warm+c.pushQs; q++ {
		before := svc.conns.Load()
		// The floor: a push of the server's size to each device at once.
		text := fmt.Sprintf("Deploy push-%d now?", q)
		payload, _ := json.Marshal(map[string]any{"v": 1, "type": "ask", "id": wireLikeID(q), "tag": "0123456789abcdefghijklmn",
			"kind": "question", "title": "shop · bench asks", "body": text, "actions": []string{"Yes", "No", "Go ahead"},
			"cap": wireLikeID(q) + wireLikeID(q), "answer": "/push/answer", "url": "/?request=" + wireLikeID(q)})
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, d := range floorDevs {
			wg.Go(func() {
				resp, err := webpush.SendNotificationWithContext(ctx, payload, &webpush.Subscription{Endpoint: svc.URL + d.path, Keys: d.keys()},
					&webpush.Options{HTTPClient: floorClient, Subscriber: "agentassistant@localhost", Topic: "0123456789abcdefghijklmn", TTL: 60,
						Urgency: webpush.UrgencyHigh, VAPIDPublicKey: vapidPub, VAPIDPrivateKey: vapidPriv})
				if err != nil {
					errs <- err
					return
				}
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return fmt.Errorf("floor push: %w", err)
		}
		last, err := lastOf(floorDevs, q)
		if err != nil {
			return err
		}
		if q > warm {
			floorDs = append(floorDs, last.Sub(t0))
			floorConns += svc.conns.Load() - before
		}
		before = svc.conns.Load()

		// The server: the question, its pushes, then its answer and the
		// pushes that close the notifications, before the next.
		id := fmt.Sprint("push-", q)
		inbox.reset()
		done := make(chan error, 1)
		t0 = time.Now()
		go func() {
			_, err := ask.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: s.token, Request: &pb.McpAskQuestionRequest{
				Question: "Deploy " + id + " now?", ProjectDirectory: "/srv/shop", AgentName: "bench", Timeout: 60}})
			done <- err
		}()
		at, err := inbox.wait("question "+id, 1)
		if err != nil {
			return err
		}
		last, err = lastOf(devs, 2*q-1)
		if err != nil {
			return err
		}
		if q == 1 { // every device can read its push
			for _, d := range devs {
				_, body, _ := d.got.nth(ctx, d.path, 1)
				plain, err := d.open([]byte(body))
				if err != nil {
					return fmt.Errorf("%s: %w", d.path, err)
				}
				if !strings.Contains(string(plain), id) {
					return fmt.Errorf("%s read %q, not question %s", d.path, plain, id)
				}
			}
		}
		if _, err := reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: s.token, Response: &pb.AskQuestionResponse{ID: id}}); err != nil {
			return err
		}
		if err := <-done; err != nil {
			return err
		}
		if _, err := lastOf(devs, 2*q); err != nil {
			return err
		}
		if q > warm {
			ds, inboxDs = append(ds, last.Sub(t0)), append(inboxDs, at.Sub(t0))
			conns += svc.conns.Load() - before
		}
		time.Sleep(5 * time.Millisecond) // the reply notifications drain
	}
	ms := func(ds []time.Duration, p float64) float64 { return pct(ds, p) / 1000 }
	name := fmt.Sprintf("push, %d device(s)", n)
	r.add(name+": the last push leaves the server, p50", ms(ds, 50), "ms").Note =
		fmt.Sprintf("floor (webpush-go to the same devices from one process, one goroutine each): p50 %.2f ms", ms(floorDs, 50))
	r.add(name+": the last push leaves the server, p99", ms(ds, 99), "ms").Note =
		fmt.Sprintf("floor: p99 %.2f ms; TLS connections opened per question: the server %.1f (for %d pushes), the floor %.1f (%d)",
			ms(floorDs, 99), float64(conns)/float64(len(ds)), 2*n, float64(floorConns)/float64(len(ds)), n)
	r.add(name+": the inbox has it, alongside, p50", ms(inboxDs, 50), "ms").Note =
		fmt.Sprintf("p99 %.2f ms; %d questions", ms(inboxDs, 99), len(inboxDs))
	return nil
}

// wireLikeID is an ID of the length the server's are.
func wireLikeID(q int) string { return fmt.Sprintf("%032x", q) }
