package srv_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/agui"
)

// postRun opens a run of thread on /agui and returns its response, whose
// events the caller reads or not.
func postRun(t *testing.T, url, thread, run string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"threadId": thread, "runId": run, "messages": []any{}, "tools": bgTool})
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
	return resp
}

// TestAGUIStalledFrontendIsCut: a frontend (a tab gone wrong, a leaked
// token) opens a run and never reads its events while the agent talks.
// The run's writes had no deadline: once the socket was full the run
// waited in a write for as long as the connection stayed open, so its
// thread stayed busy for good (its timers never looked), the agent's
// messages were refused, and the owner's page could not open a run of
// it again (run_open). A write that takes past the send bound now cuts
// the run off as a frontend that went away: the thread waits its grace
// for the frontend to come back, and the owner's next run is taken.
func TestAGUIStalledFrontendIsCut(t *testing.T) {
	url := newAGUIServer(t, agui.Options{SendTimeout: 500 * time.Millisecond, FrontendGrace: time.Minute})
	postRun(t, url, "th-stall", "r1") // its events are never read
	a := joinAgent(t, url, tokA, "th-stall")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"start","payload":{}}`)
	a.expect("session.started")
	frame, _ := json.Marshal(map[string]any{"v": "mvp-0.2", "type": "agent.message",
		"payload": map[string]any{"text": strings.Repeat("x", 1<<20)}})
	for range 64 { // more than the sockets between hold
		if err := a.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
	}

	// The owner's page opens the thread again: refused while the stalled
	// run holds it, taken once that run is cut.
	for i := 0; ; i++ {
		resp := postRun(t, url, "th-stall", "r2")
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var events []map[string]any
		for len(events) < 2 && sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				_ = json.Unmarshal([]byte(d), &ev)
				events = append(events, ev)
			}
		}
		resp.Body.Close()
		if len(events) == 2 && events[1]["code"] != "run_open" {
			if events[0]["type"] != "RUN_STARTED" {
				t.Fatalf("the owner's run began with %v", events[0])
			}
			break
		}
		if i == 200 { // about 20 s: only against a hang
			t.Fatalf("the owner's run is still refused (%v) while a frontend that reads nothing holds the thread", events)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
