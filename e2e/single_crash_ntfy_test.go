package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldNtfy is an ntfy server that holds the first publish replacing a
// question's notification (settled: no buttons) until the request ends
// (the server killed), and counts those it took.
type heldNtfy struct {
	*httptest.Server
	mu      sync.Mutex
	asked   []map[string]any
	settled []string // their titles
	seqs    []string // and their sequence IDs
	held    chan struct{}
	more    chan struct{}
}

func startHeldNtfy(t *testing.T) *heldNtfy {
	d := &heldNtfy{held: make(chan struct{}), more: make(chan struct{}, 100)}
	var once sync.Once
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if acts, _ := m["actions"].([]any); len(acts) > 0 {
			d.mu.Lock()
			d.asked = append(d.asked, m)
			d.mu.Unlock()
		} else {
			first := false
			once.Do(func() { first = true })
			if first {
				close(d.held)
				<-r.Context().Done() // the server is killed meanwhile
				return
			}
			d.mu.Lock()
			d.settled = append(d.settled, fmt.Sprint(m["title"]))
			d.seqs = append(d.seqs, fmt.Sprint(m["sequence_id"]))
			d.mu.Unlock()
		}
		d.more <- struct{}{}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(d.Close)
	return d
}

// TestSingleNtfyFollowUpOwedAcrossKill9: the person answers with the
// notification's button; the server is killed as it replaces the
// notification to say so (the publish not taken): started again, it
// makes the follow-up it owes, once, saying who answered, under the
// question's sequence ID: it replaces the question's notification.
func TestSingleNtfyFollowUpOwedAcrossKill9(t *testing.T) {
	nt := startHeldNtfy(t)
	port, data := freePort(t), t.TempDir()
	config := func(public string) string {
		return fmt.Sprintf("[channels]\npublic_url = %q\n[channels.ntfy]\nurl = %q\ntopic = \"aa-owed\"\n", public, nt.URL)
	}
	public := "http://127.0.0.1:" + port
	s := startSingle(t, port, data, config(public))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Replaced after the crash?")
	waitNotedHere(t, s)
	nt.mu.Lock()
	if len(nt.asked) != 1 {
		nt.mu.Unlock()
		t.Fatalf("%d questions published", len(nt.asked))
	}
	act := nt.asked[0]["actions"].([]any)[0].(map[string]any)
	nt.mu.Unlock()
	resp, err := http.Post(act["url"].(string), "application/json", bytes.NewReader([]byte(act["body"].(string))))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the tap: %d", resp.StatusCode)
	}
	var label struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(act["body"].(string)), &label); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, done, label.Text)
	select {
	case <-nt.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the notification was never replaced")
	}
	s.kill9(t)
	s2 := startSingle(t, port, data, config(public))
	if !s2.logw.waitFor("a settled question's follow-up made at last", 15*time.Second) {
		t.Error("the log never said the follow-up owed was made")
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if len(nt.settled) != 1 || !strings.Contains(nt.settled[0], "Answered on ntfy") {
		t.Errorf("notifications replaced after the restart: %q, want one saying who answered", nt.settled)
	}
	if seq := nt.asked[0]["sequence_id"]; len(nt.seqs) != 1 || nt.seqs[0] != seq {
		t.Errorf("the follow-up's sequence IDs %q, the question's %q: ntfy shows both", nt.seqs, seq)
	}
}
