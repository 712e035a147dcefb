//go:build unix

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// TestFaults8WipedWhileCutOff: NATS is restarted without its storage
// while B's link to it is down; A finds the buckets gone, starts afresh
// and makes them again before B's link is back. B then finds a requests
// bucket (A's new one, from revision 1) where its own was, and must take
// it for what it is, a lost storage: start afresh too. Else it follows a
// stream that is no more (its watch resumes past revisions the new one
// has not reached, so questions asked elsewhere never reach its devices)
// and keeps the requests it knew pending, lost with the storage.
func TestFaults8WipedWhileCutOff(t *testing.T) {
	ns := natstest.Start(t)
	link, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	// On ports of their own: an instance starting afresh listens there again.
	a := startServerWith(t, freePort(t), t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", "a"}, tokenA)
	b := startServerWith(t, freePort(t), t.TempDir(), []string{"-nats-url", "nats://" + link.Addr(), "-instance", "b"}, tokenA)

	// Questions before the wipe, answered on B's device: B's watch of
	// the requests goes past the revisions the new bucket will start at.
	device := dial(t, b, tokenA, "phone")
	for i, q := range []string{"Before the wipe, one?", "Before the wipe, two?", "Before the wipe, three?"} {
		done := make(chan error, 1)
		go func() {
			_, err := connectAsk(t.Context(), a, "before-"+string(rune('1'+i)), q)
			done <- err
		}()
		m := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
		if err := device.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Yes.")); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
	}
	device.Close()

	link.SetDown(true)
	ns.Wipe()
	waitLog(t, a, "NATS lost the cluster's storage")
	js := jetStreamAt(t, ns.URL())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for { // A's fresh run makes the buckets again
		if _, err := js.KeyValue(ctx, srvcluster.RequestsBucket); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("A never made the requests bucket again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	link.SetDown(false)
	if !b.logw.waitFor("NATS lost the cluster's storage", 30*time.Second) {
		t.Fatal("B, cut off during the wipe, did not find the cluster's storage lost once back")
	}
	for try := 0; strings.Count(b.logw.String(), `msg="cluster mode"`) < 2; try++ { // B's fresh run
		if try == 1500 {
			t.Fatal("B never started afresh")
		}
		time.Sleep(20 * time.Millisecond)
	}
	healthIs(t, b, 200)
	healthIs(t, a, 200)

	// A question asked through A reaches B's device.
	device = dial(t, b, tokenA, "phone")
	done := make(chan error, 1)
	go func() {
		_, err := connectAsk(t.Context(), a, "after-wipe", "After the wipe?")
		done <- err
	}()
	m := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 20*time.Second))
	if err := device.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Yes, after.")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ask after the wipe: %v", err)
	}
}
