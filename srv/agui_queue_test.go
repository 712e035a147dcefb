package srv_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/agui"
)

// TestAguiQueueBounded: an AG-UI frontend that opened a run and does not
// read its events, and an agent of the same token on /agent/ws sending
// 160 agent.message frames of 1 MiB (two and a half times what the heap
// may grow by): what waits for the frontend is bounded as any send
// queue is, so the heap grows by less than 64 MiB, and each message the
// thread does not queue is refused to its agent with the protocol's
// error, not dropped unseen.
func TestAguiQueueBounded(t *testing.T) {
	const (
		messages = 160
		size     = 1 << 20
		maxGrow  = 64 << 20
	)
	// The frontend stalls for as long as the agent sends, which under
	// the race detector may pass the send bound that cuts it off.
	url := newAGUIServer(t, agui.Options{SendTimeout: time.Hour})

	// The frontend: its run's headers are read, its events never are.
	body, _ := json.Marshal(map[string]any{"threadId": "th-slow", "runId": "r1", "messages": []any{}, "tools": bgTool})
	req, _ := http.NewRequest(http.MethodPost, url+"/agui", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+tokA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /agui: %d", resp.StatusCode)
	}

	a := joinAgent(t, url, tokA, "th-slow")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"start","payload":{}}`)
	a.expect("session.started")

	frame, _ := json.Marshal(map[string]any{"v": "mvp-0.2", "type": "agent.message",
		"payload": map[string]any{"text": strings.Repeat("x", size)}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	sent := make(chan error, 1)
	go func() {
		for range messages {
			if err := a.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
				sent <- err
				return
			}
		}
		// The relay reads an agent's frames in order: the answer to this
		// comes once every message before it was handled.
		sent <- a.ws.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"snapshot.get","id":"probe","payload":{}}`))
	}()
	refused := 0
	guard := time.After(10 * time.Minute) // against a hang only
	for done := false; !done; {
		select {
		case m, ok := <-a.in:
			if !ok {
				t.Fatalf("the agent's connection closed: %v", a.endErr)
			}
			switch m["type"] {
			case "snapshot.state":
				done = m["replyTo"] == "probe"
			case "error":
				p, _ := m["payload"].(map[string]any)
				msg, _ := p["message"].(string)
				if p["code"] != "INVALID_MESSAGE" || !strings.Contains(msg, "not delivered") {
					t.Fatalf("refusal %v", m)
				}
				refused++
			}
		case <-guard:
			t.Fatal("no answer to the probe")
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB; %d of %d messages refused", grew>>20, refused, messages)
	if grew >= maxGrow {
		t.Fatalf("the heap grew by %d MiB with the frontend not reading, want under %d MiB", grew>>20, maxGrow>>20)
	}
	if refused == 0 || refused == messages {
		t.Fatalf("%d of %d messages refused, want those past the thread's queue", refused, messages)
	}
}
