package srv_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// newStudyServer serves the whole server with study logs bounded by so.
func newStudyServer(t *testing.T, so studylog.Options) (url, dataDir string) {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	dataDir = t.TempDir()
	logs, err := studylog.Open(dataDir, so)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, StudyLogs: logs,
		AGUI: agui.Options{AgentWait: time.Minute, AgentIdle: time.Minute}})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL, dataDir
}

// startStudy starts a study session through the raw host h and returns
// its id.
func startStudy(t *testing.T, a, h *agent, id string) string {
	t.Helper()
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"` + id + `","payload":{}}`)
	st := h.until("session.start")
	h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.started","replyTo":%q,"payload":{}}`, st["id"]))
	m := a.expect("session.started")
	sid, _ := m["payload"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		t.Fatalf("session.started = %v", m)
	}
	return sid
}

func studyFiles(t *testing.T, data string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(data, studylog.RelDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(data, studylog.RelDir, e.Name()))
	}
	return out
}

// TestStudyLogFilesPerToken: a token starts max_study_logs_per_token
// study sessions, no more: the next session.start is refused
// (INVALID_MESSAGE naming the setting) before it reaches the host, no
// file is made for it, and the logs made before are whole. Another
// token has its own.
func TestStudyLogFilesPerToken(t *testing.T) {
	url, data := newStudyServer(t, studylog.Options{MaxFilesPerOwner: 3})
	h := joinRawHost(t, url, tokA, "s")
	a := joinAgent(t, url, tokA, "s")
	for i := range 3 {
		startStudy(t, a, h, fmt.Sprint("start-", i))
		a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.end","id":"end-%d","payload":{}}`, i))
		end := h.until("session.end")
		h.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"session.ended","replyTo":%q,"payload":{}}`, end["id"]))
		a.expect("session.ended")
	}
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"start-3","payload":{}}`)
	p := a.expectError("INVALID_MESSAGE", "start-3")
	if msg := p["message"].(string); !strings.Contains(msg, "[studylog] max_files_per_token") || !strings.Contains(msg, "3 study sessions") {
		t.Fatalf("refusal %q", msg)
	}
	files := studyFiles(t, data)
	if len(files) != 3 {
		t.Fatalf("%d study logs, want 3", len(files))
	}
	for _, f := range files {
		evs := readLog(t, f)
		if len(evs) == 0 || evs[len(evs)-1]["type"] != "session.ended" {
			t.Fatalf("%s: %v", f, evs)
		}
	}
	// The refused start never reached the host: what it gets next is
	// the agent's next request.
	a.sendJSON(`{"v":"mvp-0.2","type":"snapshot.get","id":"probe","payload":{}}`)
	h.next("snapshot.get", func(typ any) bool { return typ != "session.start" })
	hb := joinRawHost(t, url, tokB, "s")
	b := joinAgent(t, url, tokB, "s")
	startStudy(t, b, hb, "b-start")
}

// TestStudyLogBytesPerToken: a token's study logs never pass
// max_study_log_bytes_per_token. The agent.message that would is not
// written (no partial line) and not sent to the host: its agent is told
// (INVALID_MESSAGE naming the setting), and the study session ends with
// a last line saying why (session.ended, reason log_full), which
// its agents get too. What reached the host is what the log holds.
// Another token logs on.
func TestStudyLogBytesPerToken(t *testing.T) {
	const max = 64 << 10
	url, data := newStudyServer(t, studylog.Options{MaxBytesPerOwner: max})
	h := joinRawHost(t, url, tokA, "s")
	a := joinAgent(t, url, tokA, "s")
	sid := startStudy(t, a, h, "start")
	text := strings.Repeat("y", 2000)
	var hostGot []string
	refusedAt := ""
	for i := 0; refusedAt == ""; i++ {
		if i > max/2000 {
			t.Fatal("no bound")
		}
		id := fmt.Sprint("m-", i)
		a.sendJSON(fmt.Sprintf(`{"v":"mvp-0.2","type":"agent.message","id":%q,"payload":{"text":%q}}`, id, text))
		// Either the host gets it, or its agent hears why not.
		for waiting := true; waiting; {
			select {
			case m := <-h.in:
				if m["type"] == "agent.message" {
					hostGot = append(hostGot, m["id"].(string))
					waiting = m["id"] != id
				}
			case m := <-a.in:
				switch m["type"] {
				case "session.ended":
					p := m["payload"].(map[string]any)
					if p["reason"] != "log_full" || p["sessionId"] != sid {
						t.Fatalf("session.ended = %v", m)
					}
					refusedAt = id
				case "error":
					p := m["payload"].(map[string]any)
					if m["replyTo"] != id || p["code"] != "INVALID_MESSAGE" || !strings.Contains(p["message"].(string), "[studylog] max_bytes_per_token") {
						t.Fatalf("refusal %v", m)
					}
					if refusedAt != id {
						t.Fatalf("refused before the session ended: %v", m)
					}
					waiting = false
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s neither reached the host nor was refused", id)
			}
		}
	}
	for _, id := range hostGot {
		if id == refusedAt {
			t.Fatal("the refused message reached the host")
		}
	}
	path := filepath.Join(data, studylog.RelDir, sid+".jsonl")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > max {
		t.Fatalf("the log holds %d bytes, bound %d", fi.Size(), max)
	}
	evs := readLog(t, path) // every line whole
	var logged []string
	for _, e := range evs {
		if e["type"] == "agent.message" && e["direction"] == "in" {
			logged = append(logged, e["id"].(string))
		}
	}
	if strings.Join(logged, ",") != strings.Join(hostGot, ",") {
		t.Fatalf("logged %v, the host got %v", logged, hostGot)
	}
	last := evs[len(evs)-1]
	if p, _ := last["payload"].(map[string]any); last["type"] != "session.ended" || p["reason"] != "log_full" {
		t.Fatalf("last line %v", last)
	}
	// No study session now: a message that needs one is refused.
	a.sendJSON(`{"v":"mvp-0.2","type":"agent.message","id":"after","payload":{"text":"hi"}}`)
	a.expectError("SESSION_NOT_ACTIVE", "after")
	hb := joinRawHost(t, url, tokB, "s")
	b := joinAgent(t, url, tokB, "s")
	startStudy(t, b, hb, "b-start")
}

// TestStudyLogBoundAGUI: what an AG-UI thread writes in the study log of
// its relay session (its runs' starts and ends) obeys the same bound:
// the log never passes max_study_log_bytes_per_token, every line is
// whole, and the study session ends with its last line saying why, its
// agents told.
func TestStudyLogBoundAGUI(t *testing.T) {
	const max = 64 << 10
	url, data := newStudyServer(t, studylog.Options{MaxBytesPerOwner: max})
	open := postAGUI(t, url, tokA, map[string]any{"threadId": "th", "runId": "r0", "messages": []any{}, "tools": bgTool})
	if ev := open.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("first event %v", ev)
	}
	a := joinAgent(t, url, tokA, "th")
	a.sendJSON(`{"v":"mvp-0.2","type":"session.start","id":"start","payload":{}}`)
	sid, _ := a.expect("session.started")["payload"].(map[string]any)["sessionId"].(string)
	path := filepath.Join(data, studylog.RelDir, sid+".jsonl")
	var tools []map[string]any
	for i := range 40 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%03d_%s", i, strings.Repeat("n", 300))})
	}
	for i := 1; ; i++ {
		if i > max/(40*300) {
			t.Fatal("no bound")
		}
		// The thread's run r0 is open: each of these logs its start and
		// its RUN_ERROR run_open before the frontend reads that.
		evs := postAGUI(t, url, tokA, map[string]any{"threadId": "th", "runId": fmt.Sprint("r", i), "messages": []any{}, "tools": tools}).until()
		if last := evs[len(evs)-1]; last["code"] != "run_open" {
			t.Fatalf("run %d: %v", i, last)
		}
		evs2 := readLog(t, path)
		if last := evs2[len(evs2)-1]; last["type"] == "session.ended" {
			if p, _ := last["payload"].(map[string]any); p["reason"] != "log_full" {
				t.Fatalf("last line %v", last)
			}
			break
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > max {
		t.Fatalf("the log: %v, %v bytes, bound %d", err, fi.Size(), max)
	}
	if p := a.until("session.ended")["payload"].(map[string]any); p["reason"] != "log_full" || p["sessionId"] != sid {
		t.Fatalf("session.ended %v", p)
	}
}
