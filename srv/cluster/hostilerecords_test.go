package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// foreignKV is the bucket as a NATS client of no instance reaches it.
func foreignKV(t *testing.T, url, bucket string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// twoAndForeign starts two instances, a and b, with a device on b, and
// returns them with the requests bucket as a NATS client of no instance
// reaches it.
func twoAndForeign(t *testing.T) (a, b *instance, onB *client, kv jetstream.KeyValue) {
	t.Helper()
	ns := natstest.Start(t)
	a, b = start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onB = newClient("pb")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	return a, b, onB, foreignKV(t, ns.URL(), RequestsBucket)
}

// askAndAnswer asks a question through a, answers it on b as its device
// onB, and returns the requests onB was shown before it.
func askAndAnswer(t *testing.T, a, b *instance, onB *client) []string {
	t.Helper()
	ctx := context.Background()
	done := ask(ctx, a, question("real", "Still there?"))
	shown := shownBefore(t, onB, "real")
	if err := b.hub.Answer(ctx, tok, wire.AskQuestion, "real", reply("pb", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("Ask = %+v, %v", r.rep, r.err)
	}
	return shown
}

// shownBefore returns the requests c is shown before the request id.
func shownBefore(t *testing.T, c *client, id string) []string {
	t.Helper()
	var shown []string
	for {
		m := c.expectAny(t)
		q, f := m.GetAskQuestionRequest(), m.GetTaskFinishRequest()
		switch {
		case q.GetID() == id:
			return shown
		case q != nil:
			shown = append(shown, m.Cmd+" "+q.GetID())
		case f != nil:
			shown = append(shown, m.Cmd+" "+f.GetID())
		}
	}
}

// TestHostileRecords: records a NATS client of no instance writes into the
// requests bucket, unreadable or with values no door would make, take no
// instance down and keep no question from being asked and answered.
func TestHostileRecords(t *testing.T) {
	a, b, onB, kv := twoAndForeign(t)
	ctx, room := context.Background(), store.Room(tok)
	put := func(id, value string) {
		t.Helper()
		if _, err := kv.Put(ctx, key(room, id), []byte(value)); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	rec := func(fields string) string { return `{"room":"` + room + `",` + fields + `}` }
	put("junk", "not JSON at all")
	put("empty", "")
	put("array", "[1,2,3]")
	put("kindless", rec(`"id":"kindless","kind":9999,"text":"odd kind","status":"pending","timeoutSeconds":60`))
	put("forever", rec(`"id":"forever","kind":1,"text":"overflows","status":"pending","timeoutSeconds":9223372036854775807`))
	put("badreply", rec(`"id":"badreply","kind":1,"text":"garbage reply","status":"answered","reply":"/////w=="`))
	put("badquestions", rec(`"id":"badquestions","kind":1,"text":"garbage choices","status":"pending","timeoutSeconds":60,"questions":"/////w=="`))
	put("weird", rec(`"id":"weird","kind":1,"text":"unknown status","status":"exploded"`))
	put("big", rec(`"id":"big","kind":1,"text":"`+strings.Repeat("x", 200<<10)+`","status":"pending","timeoutSeconds":60`))

	shown := askAndAnswer(t, a, b, onB)
	t.Logf("shown before a question asked after them: %q", shown)
	for _, s := range shown {
		if id := s[strings.IndexByte(s, ' ')+1:]; slices.Contains([]string{"junk", "empty", "array", "badreply", "weird"}, id) {
			t.Errorf("B shows %q, not a pending request", s)
		}
	}
}

// TestRecordNotOfItsKey: a record whose value names another request than
// its key (another ID, none, another room) is no request: written under
// one key and settled under another, it could never be answered nor end,
// and would stay on every screen. No instance shows it.
func TestRecordNotOfItsKey(t *testing.T) {
	a, b, onB, kv := twoAndForeign(t)
	ctx, room := context.Background(), store.Room(tok)
	for k, v := range map[string]string{
		key(room, "elsewhere"):    `{"room":"` + room + `","id":"other-id","kind":1,"text":"key and value disagree","status":"pending","timeoutSeconds":60}`,
		key(room, "noid"):         `{"room":"` + room + `","id":"","kind":1,"text":"no id","status":"pending","timeoutSeconds":60}`,
		key("otherroom", "moved"): `{"room":"` + room + `","id":"moved","kind":1,"text":"another room's key","status":"pending","timeoutSeconds":60}`,
	} {
		if _, err := kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if shown := askAndAnswer(t, a, b, onB); len(shown) > 0 {
		t.Errorf("B shows %q, records not of their keys", shown)
	}
	// The answer's record reaches each instance in its time; a record
	// taken for a request would stay pending for good.
	for _, in := range []*instance{a, b} {
		eventually(t, "no request pending", func() bool { return len(in.hub.PendingIDs()) == 0 })
	}
}

// expectAny waits for c's next frame.
func (c *client) expectAny(t *testing.T) *pb.WebsocketMessage {
	t.Helper()
	select {
	case m := <-c.frames:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no frame", c.id)
		return nil
	}
}
