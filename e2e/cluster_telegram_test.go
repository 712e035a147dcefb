package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// TestClusterTelegram: two agentassistant-srv processes on one
// nats-server, with the same [channels.telegram] (the Bot API double in
// this process). An agent asks through the instance that does not poll
// the bot; the person's reply in Telegram reaches the one that does, and
// the agent has it. Then the polling instance is killed (kill -9: it
// cannot let go of its lease); the agent asks again through the
// survivor, the person replies, and once the lease lapses the survivor
// polls and the agent has that answer too. No one is told their answer
// was not taken.
func TestClusterTelegram(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	ns := natstest.Start(t)
	config := telegramConfig(tg.URL)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URL(), name, config)
	}
	js := jetStreamAt(t, ns.URL())

	poller := leaseHolder(t, js, func(string) bool { return true })
	asker := map[string]string{"a": "b", "b": "a"}[poller]
	ask := func(id, question string) <-chan *pb.AskQuestionResponse {
		out := make(chan *pb.AskQuestionResponse, 1)
		go func() {
			r, err := connectAsk(context.Background(), srvs[asker], id, question)
			if err != nil {
				t.Errorf("ask %s: %v", id, err)
			}
			out <- r
		}()
		return out
	}
	// reply waits for the n-th question's message, and for the note of
	// what it asks (the reply is read by whichever instance polls), then
	// replies to it with text.
	reply := func(n int, id, text string) int {
		msg, err := strconv.Atoi(tg.Call(t, "sendMessage", n)["sent_message_id"])
		if err != nil {
			t.Fatal(err)
		}
		waitNoted(t, js, id)
		tg.Push(telegramtest.Reply(chat, 500+n, msg, text))
		return msg
	}
	answer := func(done <-chan *pb.AskQuestionResponse, want string) {
		t.Helper()
		select {
		case r := <-done:
			if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != want {
				t.Fatalf("the agent got %v, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the agent never got %q", want)
		}
	}

	done := ask("tg-1", "Deploy now?")
	msg := reply(1, "tg-1", "Ship it.")
	answer(done, "Ship it.")
	// Answered where the bot is polled, and told there: that instance
	// edits the message the other sent.
	if got := tg.Call(t, "editMessageText", 1); got["message_id"] != strconv.Itoa(msg) || !strings.Contains(got["text"], "Answered") {
		t.Errorf("the settled edit: %v", got)
	}

	srvs[poller].kill9(t)
	done = ask("tg-2", "Roll back?")
	reply(2, "tg-2", "Not yet.")
	answer(done, "Not yet.")
	if got := leaseHolder(t, js, func(string) bool { return true }); got != asker {
		t.Errorf("the lease is %q's, want the survivor's (%q)", got, asker)
	}
	// Updates are handled in order: any read again after the lease moved
	// was handled before the second reply answered.
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}

// startInstanceConfig runs agentassistant-srv as the instance name of
// the cluster at natsURL, serving tokenA, with the TOML config given.
// The bot of the Telegram cluster tests, and the chat it serves.
const (
	tgToken = "123456:ABC-e2e-cluster-bot-token"
	chat    = 42
)

// telegramConfig is the [channels.telegram] of every instance of those
// tests: the bot, the chat, the Bot API double at api.
func telegramConfig(api string) string {
	return fmt.Sprintf("[channels.telegram]\nbot_token = %q\nchats = [%d]\napi_url = %q\n", tgToken, chat, api)
}

// jetStreamAt is a JetStream client of the NATS at url, closed with the
// test: to watch the channels' buckets.
func jetStreamAt(t *testing.T, url string) jetstream.JetStream {
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
	return js
}

func startInstanceConfig(t *testing.T, natsURL, name, config string) *server {
	t.Helper()
	data := t.TempDir()
	path := filepath.Join(data, "channels.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("tokens = [%q]\n%s", tokenA, config)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, "0", data, []string{"-config", path, "-nats-url", natsURL, "-instance", name}, tokenA)
}

// leaseHolder waits for a channel's lease (the cluster's only one here)
// to be held by an instance that ok accepts, and names it.
func leaseHolder(t *testing.T, js jetstream.JetStream, ok func(string) bool) string {
	t.Helper()
	var holder string
	watchBucket(t, js, srvcluster.LeasesBucket, func(v []byte) bool {
		holder = string(v)
		return ok(holder)
	})
	return holder
}

// waitNoted waits for the note of what a message asks: the question id,
// pending.
func waitNoted(t *testing.T, js jetstream.JetStream, id string) {
	t.Helper()
	watchBucket(t, js, srvcluster.NotesBucket, func(v []byte) bool {
		var q struct {
			ID   string `json:"i"`
			Gone string `json:"g"`
		}
		// A note's value is its expiry (8 bytes), then its JSON.
		return len(v) > 8 && json.Unmarshal(v[8:], &q) == nil && q.ID == id && q.Gone == ""
	})
}

// watchBucket watches the values of bucket, those there and those put,
// until done holds for one; it fails t after 30 s.
func watchBucket(t *testing.T, js jetstream.JetStream, bucket string, done func([]byte) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("open %s: %v", bucket, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatalf("watch %s: %v", bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e != nil && e.Operation() == jetstream.KeyValuePut && done(e.Value()) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("nothing in %s came as wanted", bucket)
		}
	}
}
