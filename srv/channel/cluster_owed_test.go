package channel_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// refuser stands between an instance and the Bot API: it refuses the
// edits (a 502, the service out of reach) until let go, and counts the
// edits refused and passed.
type refuser struct {
	refusing         atomic.Bool
	refused, through atomic.Int32
	url              string
}

func newRefuser(t *testing.T, api string) *refuser {
	u, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{}
	r.refusing.Store(true)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a poll cut as the test ends
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/editMessageText") {
			if r.refusing.Load() {
				r.refused.Add(1)
				http.Error(w, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`, http.StatusBadGateway)
				return
			}
			r.through.Add(1)
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// TestClusterEditOwedTakenOver: in a cluster, a settled question's edit
// that failed every try is noted owed and tried again by the instance
// holding the channel's lease; once that instance dies, the next holder
// takes it over and makes it when the service is back.
func TestClusterEditOwedTakenOver(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	start := func(n *node, via string) *channel.Telegram {
		tg := &channel.Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: via}
		o := channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {tg}},
			Notes: n.ch, Leader: n.ch, Tries: 1, Backoff: time.Millisecond}
		channel.SetOwedScan(&o, 50*time.Millisecond)
		m := channel.New(o)
		t.Cleanup(m.Close)
		return tg
	}
	ra, rb := newRefuser(t, api.URL), newRefuser(t, api.URL)
	start(b, rb.url)
	waitUntil(t, "b polls", func() bool { return api.Polls() > 0 })
	tg := start(a, ra.url)

	answered := askOn(a.hub, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	waitUntil(t, "B reads what the message asks", func() bool {
		_, ok, _ := b.ch.Get(t.Context(), channel.TelegramNoteKey(tg, 42, msg))
		return ok
	})
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	recv(t, "the agent's answer", answered)
	// B, where the answer was written and which holds the lease, is
	// refused its edit, then tries it again.
	waitUntil(t, "B tries the edit owed again", func() bool { return rb.refused.Load() >= 2 })

	_ = b.c.Close() // B dies: its lease lapses
	waitUntil(t, "A, the next holder, tries the edit owed", func() bool { return ra.refused.Load() >= 1 })
	rb.refusing.Store(false)
	ra.refusing.Store(false)
	// A tries it again after its backoff (owedWait, doubling).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	call, err := api.Wait(ctx, "editMessageText", 1)
	if err != nil {
		t.Fatal("the edit owed never made:", err)
	}
	if got := call.Form; got["message_id"] != strconv.Itoa(msg) || !strings.Contains(got["text"], "Answered") {
		t.Errorf("the edit made at last: %v", got)
	}
	if ra.through.Load() != 1 || rb.through.Load() != 0 {
		t.Errorf("edits passed: %d through A, %d through B; want A's alone", ra.through.Load(), rb.through.Load())
	}
}
