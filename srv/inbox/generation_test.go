package inbox_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// The older clients' ways, kept by the /ws door: a task report goes out
// under both generations' Cmds, and the pending list names it as the
// generation that asked it, or as the client answers reports.

// pendingNames asks for the pending list and maps its task reports to
// their message_type.
func pendingNames(t *testing.T, c interface {
	Send(*pb.WebsocketMessage) error
	Expect(string, time.Duration) (*pb.WebsocketMessage, error)
}) map[string]string {
	t.Helper()
	if err := c.Send(&pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Expect(wire.CmdGetPendingMessages, wait)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range m.GetGetPendingMessagesResponse().GetPendingMessages() {
		if r := p.GetTaskFinishRequest(); r != nil {
			out[r.GetID()] = p.GetMessageType()
		}
	}
	return out
}

// TestPendingReportNamedAsAsked: the pending list names a task report as
// the generation that asked it does, so that generation's apps, which
// convert only their own name, list it: "TaskFinish" for one asked
// through the older RPC, "WorkReport" for the rest; a client that
// answered a report is given every report under the name it answered
// with. Each report is shown under both Cmds.
func TestPendingReportNamedAsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		c := f.login(t, tokA, "app")
		for _, r := range []hub.Request{
			{Kind: wire.TaskFinish, ID: "old", Text: "Done.", Timeout: time.Hour, TaskFinishEra: true},
			{Kind: wire.TaskFinish, ID: "current", Text: "Done too.", Timeout: time.Hour},
			{Kind: wire.TaskFinish, ID: "answered", Text: "Done three.", Timeout: time.Hour},
		} {
			go func() { _, _ = f.hub.Ask(t.Context(), tokA, r) }()
			synctest.Wait()
			for _, cmd := range []string{wire.CmdTaskFinish, wire.CmdWorkReport} {
				if m := expect(t, c, cmd); m.GetTaskFinishRequest().GetID() != r.ID || m.GetSeq() == 0 {
					t.Fatalf("%s shown as %v", r.ID, m)
				}
			}
		}
		want := map[string]string{"old": wire.CmdTaskFinish, "current": wire.CmdWorkReport, "answered": wire.CmdWorkReport}
		if got := pendingNames(t, c); len(got) != 3 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("pending list names %v, want %v", got, want)
		}
		send(t, c, &pb.WebsocketMessage{Cmd: wire.CmdTaskFinishReply, TaskFinishResponse: &pb.TaskFinishResponse{ID: "answered"}})
		want = map[string]string{"old": wire.CmdTaskFinish, "current": wire.CmdTaskFinish}
		if got := pendingNames(t, c); len(got) != 2 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("to a client that answered TaskFinishReply the pending list names %v, want %v", got, want)
		}
	})
}

// TestReplyNotificationNamesTheClient: seed 002 names who answered by
// client ID in the reply notifications' StrParam ("Response received
// from client <id>", "Task completion confirmed by client <id>"); the
// nickname, for a person to read, follows in parentheses. A task
// report's goes out under both generations' Cmds.
func TestReplyNotificationNamesTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		a, b := f.login(t, tokA, "laptop"), f.login(t, tokA, "phone")
		for _, tc := range []struct {
			kind        wire.Kind
			shown, cmds []string
			strParam    string
		}{
			{wire.AskQuestion, []string{wire.CmdAskQuestion}, []string{wire.CmdAskQuestionReplyNotification},
				"Response received from client " + a.ID + " (laptop)"},
			{wire.TaskFinish, []string{wire.CmdTaskFinish, wire.CmdWorkReport}, []string{wire.CmdTaskFinishReplyNotification, wire.CmdWorkReportReplyNotification},
				"Task completion confirmed by client " + a.ID + " (laptop)"},
		} {
			id := "r-" + tc.kind.String()
			go func() {
				_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: tc.kind, ID: id, Text: "x", Timeout: time.Minute})
			}()
			for _, cmd := range tc.shown {
				expect(t, b, cmd)
			}
			if err := f.hub.Answer(context.Background(), tokA, tc.kind, id, hub.Reply{ClientID: a.ID, Nickname: "laptop"}); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range tc.cmds {
				if got := expect(t, b, cmd).GetStrParam(); got != tc.strParam {
					t.Errorf("%s: StrParam %q, want %q", cmd, got, tc.strParam)
				}
			}
		}
	})
}
