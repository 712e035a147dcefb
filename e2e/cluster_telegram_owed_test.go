package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
)

// TestClusterTelegramEditOwedAcrossKill9: two instances; the person's
// reply is taken by the one that polls the bot, which edits the message
// to say so, and Telegram refuses the edits (out of reach). That
// instance is killed (kill -9) while the edit is owed: the survivor,
// once it holds the lease, makes the edit when Telegram is back.
func TestClusterTelegramEditOwedAcrossKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	var refusing atomic.Bool
	refusing.Store(true)
	refused := make(chan struct{})
	var once sync.Once
	u, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a poll cut by the kill
	link := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/editMessageText") && refusing.Load() {
			once.Do(func() { close(refused) })
			http.Error(w, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`, http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(link.Close)
	ns := natstest.Start(t)
	config := telegramConfig(link.URL)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URL(), name, config)
	}
	js := jetStreamAt(t, ns.URL())
	poller := leaseHolder(t, js, func(string) bool { return true })
	survivor := map[string]string{"a": "b", "b": "a"}[poller]

	done := make(chan *pb.AskQuestionResponse, 1)
	go func() {
		r, err := connectAsk(context.Background(), srvs[survivor], "tg-owed", "Deploy now?")
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		done <- r
	}()
	msg, err := strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"])
	if err != nil {
		t.Fatal(err)
	}
	waitNoted(t, js, "tg-owed")
	tg.Push(telegramtest.Reply(chat, 501, msg, "Ship it."))
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != "Ship it." {
			t.Fatalf("the agent got %v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the reply")
	}
	// The poller, where the answer was written, notes the edit owed and
	// is refused it.
	watchBucket(t, js, srvcluster.NotesBucket, func(v []byte) bool {
		var owed struct {
			ID    string `json:"i"`
			Since string `json:"since"`
		}
		return len(v) > 8 && json.Unmarshal(v[8:], &owed) == nil && owed.ID == "tg-owed" && owed.Since != ""
	})
	select {
	case <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("the edit was never tried")
	}
	srvs[poller].kill9(t)
	leaseHolder(t, js, func(h string) bool { return h == survivor })
	waitLog(t, srvs[survivor], "follow-ups owed are tried here")
	refusing.Store(false)
	wantEdited(t, tg, msg)
	waitLog(t, srvs[survivor], "a settled question's follow-up made at last")
}
