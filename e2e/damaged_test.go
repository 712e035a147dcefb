package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// askFrom asks a question under id from project through Connect, in the
// background: the agent's call stays open until the server dies.
func askFrom(s *server, id, project, text string) {
	go func() {
		c := agentassistprotoconnect.NewSrvAgentAssistClient(asAgent, s.URL)
		_, _ = c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
			ID: id, UserToken: tokenA, Request: &pb.McpAskQuestionRequest{Question: text, ProjectDirectory: project, Timeout: 600},
		})
	}()
}

// waitFolded waits until the journal is empty again once the questions
// were acknowledged (the writer folded them into the database) and the
// list of pending requests beside the database names every one of ids.
func waitFolded(t *testing.T, data string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		fi, err := os.Stat(filepath.Join(data, "agentassistant.journal"))
		listed, _ := os.ReadFile(filepath.Join(data, "agentassistant.pending"))
		named := true
		for _, id := range ids {
			named = named && strings.Contains(string(listed), `"id":"`+id+`"`)
		}
		if err == nil && fi.Size() == 0 && named {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the journal was never folded into the database")
}

// waitPending waits until n questions are pending (each is, once its
// record is in the journal).
func waitPending(t *testing.T, s *server, n int) {
	t.Helper()
	c := dial(t, s, tokenA, "watcher")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := c.Next(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetCmd() == "GetPendingMessages" {
				if len(m.GetGetPendingMessagesResponse().GetPendingMessages()) >= n {
					return
				}
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%d questions never were pending", n)
}

var lostLine = regexp.MustCompile(`the request store was damaged.*`)

// cutBefore returns where to cut the database at path so that no copy of
// any of texts is left whole: at the first byte of the first copy, or,
// onPage, at the start of its page. Where bbolt put them depends on how
// many commits came before (it reuses the pages they freed), so a fixed
// size may leave them all whole: the store then restores them, rightly.
func cutBefore(t *testing.T, path string, onPage bool, texts ...string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for _, text := range texts {
		if i := bytes.Index(b, []byte(text)); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		t.Fatalf("no question is in the database: %v", texts)
	}
	if onPage {
		first -= first % os.Getpagesize() // bbolt's page size
	}
	return int64(first)
}

// TestDamagedStoreSaysWhatItLost: three questions wait, the journal is
// folded into the database, the server is killed and the database cut
// short before the questions. After the restart nothing of them can be
// read back; the log says that three were lost and which, and every
// device logging in is told which projects' questions could not be
// restored. The questions are asked at once (one fold, usually), or one
// by one, each folded before the next (bbolt then put them on the file's
// third page, which a cut at a fixed 10,000 or 12,288 bytes kept whole);
// the cut is in the middle of a page, or at its start.
func TestDamagedStoreSaysWhatItLost(t *testing.T) {
	for _, tc := range []struct{ oneByOne, onPage bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("oneByOne=%v,onPage=%v", tc.oneByOne, tc.onPage), func(t *testing.T) {
			port, data := freePort(t), t.TempDir()
			s := startServerWith(t, port, data, nil, tokenA)
			projects := map[string]string{"lost-1": "/home/me/shop", "lost-2": "/home/me/blog", "lost-3": "/srv/infra"}
			var asked, texts []string
			for _, id := range slices.Sorted(maps.Keys(projects)) {
				texts = append(texts, "Will "+id+" survive?")
				askFrom(s, id, projects[id], texts[len(texts)-1])
				if tc.oneByOne {
					asked = append(asked, id)
					waitFolded(t, data, asked...)
				}
			}
			waitPending(t, s, 3)
			waitFolded(t, data, slices.Collect(maps.Keys(projects))...)
			s.kill9(t)
			db := filepath.Join(data, "agentassistant.db")
			cut := cutBefore(t, db, tc.onPage, texts...)
			t.Logf("cut at %d bytes", cut)
			if err := os.Truncate(db, cut); err != nil {
				t.Fatal(err)
			}

			s = startServerWith(t, port, data, nil, tokenA)
			line := lostLine.FindString(s.logw.String())
			t.Logf("log: %s", line)
			if !strings.Contains(line, "lost=3") {
				t.Errorf("the log does not say three were lost: %q", line)
			}
			for id := range projects {
				if !strings.Contains(line, id) {
					t.Errorf("the log does not name %s: %q", id, line)
				}
			}
			// Every device logging in is told, until one dismisses it.
			for _, nick := range []string{"pc", "phone"} {
				c := dial(t, s, tokenA, nick)
				m := must[*pb.WebsocketMessage](t)(c.Expect("RequestsLost", 5*time.Second))
				got := map[string]string{}
				for _, l := range m.GetRequestsLost().GetRequests() {
					got[l.GetRequestId()] = l.GetProjectDirectory()
					if l.GetMessageType() != "AskQuestion" {
						t.Errorf("%s: message type %q", l.GetRequestId(), l.GetMessageType())
					}
				}
				if !maps.Equal(got, projects) {
					t.Fatalf("%s was told %v lost, want %v", nick, got, projects)
				}
				if nick == "pc" {
					if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
						t.Fatal(err)
					}
					if m := must[*pb.WebsocketMessage](t)(c.Expect("GetPendingMessages", 5*time.Second)); len(m.GetGetPendingMessagesResponse().GetPendingMessages()) != 0 {
						t.Fatalf("restored after all: %v", m)
					}
				}
				if nick == "phone" {
					if err := c.Send(m); err != nil { // dismissed: the same requests back
						t.Fatal(err)
					}
					if m := must[*pb.WebsocketMessage](t)(c.Expect("RequestsLost", 5*time.Second)); len(m.GetRequestsLost().GetRequests()) != 0 {
						t.Fatalf("after the dismissal: %v", m)
					}
				}
			}
			// Dismissed for good: not told again, after a restart either.
			s.stopCleanly(t)
			s = startServerWith(t, port, data, nil, tokenA)
			c := dial(t, s, tokenA, "tablet")
			if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
				t.Fatal(err)
			}
			if m := must[*pb.WebsocketMessage](t)(c.Next(5 * time.Second)); m.GetCmd() != "GetOnlineUsers" {
				t.Fatalf("after the dismissal a login is sent %v", m)
			}
			kept, _ := filepath.Glob(filepath.Join(data, "agentassistant.db.damaged-*"))
			if len(kept) != 1 {
				t.Errorf("the damaged database was not set aside: %v", kept)
			}
		})
	}
}
