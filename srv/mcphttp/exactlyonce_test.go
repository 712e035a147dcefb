package mcphttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// numberedProgress makes the bus carry each progress event the call's
// instance relays as progress N, N its number in that instance's log,
// so that a client which gets one event twice sees the same progress
// twice; and drops every message for which drop says so.
func numberedProgress(drop func(relayMsg) bool) func([]byte) []byte {
	return func(b []byte) []byte {
		var m relayMsg
		if json.Unmarshal(b, &m) != nil {
			return b
		}
		if drop(m) {
			return nil
		}
		if m.Kind != relayEvent || !strings.Contains(string(m.Data), `"notifications/progress"`) {
			return b
		}
		m.Data = json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p7","progress":` + strconv.FormatUint(m.N, 10) + `}}`)
		return signRelay(sharedKey, "token-a", m)
	}
}

// progressN is the progress an event's data says; -1 when it is none.
func progressN(data string) int {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Progress *int `json:"progress"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(data), &m) != nil || m.Method != "notifications/progress" || m.Params.Progress == nil {
		return -1
	}
	return *m.Params.Progress
}

// getFrom resumes sid's stream at base after last.
func getFrom(t *testing.T, base, sid, last string) *http.Response {
	t.Helper()
	req := mcpRequest(t, http.MethodGet, base+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("resume through %s after %s: %d", base, last, resp.StatusCode)
	}
	return resp
}

// TestResumedExactlyOnceAcksLost: a call asks on A, its stream is cut
// and resumed through B, which writes A's events; every word B sends A
// of which of its events is which of A's is lost on the way. The
// client leaves B and resumes through C from the last event B gave it,
// then through A, then through B again: each stream goes on after the
// last event the client has, each of A's events comes once, in order,
// and no event ID comes twice on the client's streams.
func TestResumedExactlyOnceAcksLost(t *testing.T) {
	be := newAsker()
	rb, bases := newRelayPeersWith(t, 3, be, Options{
		Replay: ReplayLimits{Events: 4096, Bytes: 8 << 20},
		Bridge: mcpbridge.Options{ProgressInterval: 5 * time.Millisecond}})
	rb.mu.Lock()
	rb.forged = numberedProgress(func(m relayMsg) bool { return m.Kind == "ack" })
	rb.mu.Unlock()
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)

	aTag, _, _, _ := parseEventID(last)
	ids := map[string]bool{last: true}
	seen := -1
	// read takes n progress events of ch, each after those seen before
	// and under an ID never seen.
	read := func(where string, ch <-chan sse, n int) {
		t.Helper()
		for got := 0; got < n; {
			ev := awaitEvent(t, ch, func(sse) bool { return true })
			if ev.id != "" {
				if ids[ev.id] {
					t.Fatalf("%s: event ID %s came twice", where, ev.id)
				}
				ids[ev.id] = true
				last = ev.id
			}
			p := progressN(ev.data)
			if p < 0 {
				continue
			}
			if tag, n, _, _ := parseEventID(ev.id); tag == aTag {
				p = int(n) // A's own event, as A numbers it
			}
			if p <= seen {
				t.Fatalf("%s: progress %d after %d: one of A's events again, or out of order", where, p, seen)
			}
			seen = p
			got++
		}
	}

	// B, C, then A where the call began, and B again, each from the
	// last event the one before gave.
	var ch <-chan sse
	for i, at := range []int{1, 2, 0, 1} {
		resp := getFrom(t, bases[at], sid, last)
		defer resp.Body.Close()
		ch = events(resp.Body)
		read("instance "+strconv.Itoa(at)+", leg "+strconv.Itoa(i), ch, 3)
		if i < 3 {
			resp.Body.Close()
		}
	}
	be.answer(0, "go ahead")
	responses := 0
	for ev := range ch {
		if strings.HasPrefix(ev.data, "error") {
			t.Fatal(ev.data)
		}
		if ev.id != "" && ids[ev.id] {
			t.Fatalf("last leg: event ID %s came twice", ev.id)
		}
		ids[ev.id] = true
		if p := progressN(ev.data); p >= 0 && p <= seen {
			t.Fatalf("last leg: progress %d after %d", p, seen)
		} else if p >= 0 {
			seen = p
		}
		if strings.Contains(ev.data, `"id":7`) {
			responses++
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times", responses)
	}
}

// TestEventIDOrigin: an ID names the event of the call's instance its
// client has after its own tag and number; one that names it amiss is
// not an ID this server gives.
func TestEventIDOrigin(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want eventPos
		ok   bool
	}{
		{"bbbbbbbbbb-5@aaaaaaaaaa-10.claims.sig", eventPos{"aaaaaaaaaa", 10}, true},
		{"bbbbbbbbbb-5@aaaaaaaaaa-0", eventPos{"aaaaaaaaaa", 0}, true},
		{"bbbbbbbbbb-5", eventPos{"bbbbbbbbbb", 5}, true},
		{"bbbbbbbbbb-5@aaaaaaaaaa", eventPos{}, false},
		{"bbbbbbbbbb-5@-3", eventPos{}, false},
		{"bbbbbbbbbb-5@aaaaaaaaaa-x", eventPos{}, false},
		{"bbbbbbbbbb-5@aaaaaaaaaa-1@cccccccccc-2", eventPos{}, false},
	} {
		got, err := originOf(tc.id)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("originOf(%q) = %+v, %v; want %+v, ok %v", tc.id, got, err, tc.want, tc.ok)
		}
	}
}
