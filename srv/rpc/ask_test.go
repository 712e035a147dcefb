package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// unsaving is a cluster store (hub.Shared) that can save nothing: every
// read and write fails with err, as NATS without quorum, or a full disk
// under it, makes them fail.
type unsaving struct{ err error }

func (u unsaving) Create(context.Context, hub.SharedRecord) (uint64, error) { return 0, u.err }
func (u unsaving) Get(context.Context, string, string) (hub.SharedRecord, uint64, error) {
	return hub.SharedRecord{}, 0, u.err
}
func (u unsaving) Update(context.Context, hub.SharedRecord, uint64) (uint64, error) { return 0, u.err }
func (u unsaving) Epoch() string                                                    { return "unsaving" }

// TestHubErrorsBecomeCodes: what the hub says of a request reaches the
// agent as the Connect code its client acts on: the bridge asks again
// (or another server) on unavailable, gives up at once on
// resource_exhausted, reports a timeout as deadline_exceeded.
func TestHubErrorsBecomeCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hub  hub.Options
		// call makes the call whose outcome is checked, in a bubble.
		call func(t *testing.T, f *fixture) error
		want string
		says string
	}{
		{
			name: "no answer before the timeout",
			call: func(t *testing.T, f *fixture) error {
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Ship it?", 5))
				return err
			},
			want: "deadline_exceeded", says: "no reply within 5s; the request was withdrawn",
		},
		{
			name: "the agent cancels it",
			call: func(t *testing.T, f *fixture) error {
				asked := f.askAsync(context.Background(), question("q", "Ship it?", 60))
				synctest.Wait()
				if _, err := f.control.CancelRequest(context.Background(), &pb.CancelRequestRequest{UserToken: tokA, ID: "q"}); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				return (<-asked).err
			},
			want: "canceled", says: hub.ErrWithdrawn.Error(),
		},
		{
			name: "its ID is another request's",
			call: func(t *testing.T, f *fixture) error {
				f.askAsync(context.Background(), question("q", "Ship it?", 60))
				synctest.Wait()
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Delete it?", 60))
				return err
			},
			want: "already_exists", says: "request q: " + hub.ErrDuplicate.Error(),
		},
		{
			name: "its answer went to a later call of the project",
			call: func(t *testing.T, f *fixture) error {
				ctx, leave := context.WithCancel(context.Background())
				ctx, _ = headers(ctx, wire.TakesMissedHeader, wire.TakesMissedYes)
				asked := f.askAsync(ctx, question("q", "Ship it?", 60))
				synctest.Wait()
				leave()
				<-asked
				synctest.Wait()
				if err := f.answer(context.Background(), "q", "phone", "Yes."); err != nil {
					t.Fatalf("answer: %v", err)
				}
				got, err := f.control.TakeMissedAnswers(context.Background(), &pb.TakeMissedAnswersRequest{UserToken: tokA, ProjectDirectory: "/src/app"})
				if err != nil || len(got.GetAnswers()) != 1 || got.GetAnswers()[0].GetAnsweredBy() != "phone" {
					t.Fatalf("missed answers %v, %v", got, err)
				}
				_, err = f.agent.AskQuestion(context.Background(), question("q", "Ship it?", 60))
				return err
			},
			want: "failed_precondition", says: hub.ErrHandedOver.Error(),
		},
		{
			name: "the server is shutting down",
			call: func(t *testing.T, f *fixture) error {
				f.hub.Close()
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Ship it?", 60))
				return err
			},
			want: "unavailable", says: hub.ErrClosed.Error(),
		},
		{
			// It wraps ErrNotSaved too: unavailable must win, so that
			// the bridge tries again.
			name: "the cluster's NATS is away",
			hub:  hub.Options{Shared: unsaving{fmt.Errorf("%w: no quorum", hub.ErrUnreachable)}},
			call: func(t *testing.T, f *fixture) error {
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Ship it?", 60))
				return err
			},
			want: "unavailable", says: "no quorum",
		},
		{
			name: "it cannot be saved",
			hub:  hub.Options{Shared: unsaving{syscall.ENOSPC}},
			call: func(t *testing.T, f *fixture) error {
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Ship it?", 60))
				return err
			},
			want: "resource_exhausted", says: "the server cannot save the request: no space left on device",
		},
		{
			// The agent hears at once what to do, not a hang nor a
			// retry that cannot help.
			name: "too many wait already",
			hub:  hub.Options{MaxPending: 1},
			call: func(t *testing.T, f *fixture) error {
				f.askAsync(context.Background(), question("q1", "Ship it?", 60))
				synctest.Wait()
				_, err := f.agent.AskQuestion(context.Background(), question("q2", "Deploy it?", 60))
				return err
			},
			want: "resource_exhausted", says: "1 wait, the most a token may have; answer or cancel some first, or raise [requests] max_pending_per_token",
		},
		{
			name: "too many bytes wait already",
			hub:  hub.Options{MaxPendingBytes: 30},
			call: func(t *testing.T, f *fixture) error {
				f.askAsync(context.Background(), question("q1", "Ship it?", 60))
				synctest.Wait()
				_, err := f.agent.AskQuestion(context.Background(), question("q2", "Deploy it now, please?", 60))
				return err
			},
			want: "resource_exhausted", says: "past the 30 a token may have; answer or cancel some first, or raise [requests] max_pending_bytes_per_token",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, setup{hub: tc.hub})
				err := tc.call(t, f)
				if got := codeOf(err); got != tc.want {
					t.Fatalf("code %s (%v), want %s", got, err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("error %q does not say %q", err, tc.says)
				}
			})
		})
	}
}

// TestTimeoutIsClamped: a request's Timeout, in seconds, is how long it
// waits for a person; none (0 or less) is DefaultTimeout, and none is
// longer than MaxTimeout.
func TestTimeoutIsClamped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout int32
		want    time.Duration
	}{
		{"none: the default", 0, 30 * time.Second},
		{"negative: the default", -5, 30 * time.Second},
		{"within the cap", 5, 5 * time.Second},
		{"at the cap", 3600, time.Hour},
		{"a year: the cap", 365 * 24 * 3600, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, setup{rpc: rpc.Options{DefaultTimeout: 30 * time.Second, MaxTimeout: time.Hour}})
				began := time.Now()
				_, err := f.agent.AskQuestion(context.Background(), question("q", "Ship it?", tc.timeout))
				if took := time.Since(began); took != tc.want {
					t.Errorf("the call ended after %s, want %s", took, tc.want)
				}
				if codeOf(err) != "deadline_exceeded" || !strings.Contains(err.Error(), "no reply within "+tc.want.String()) {
					t.Errorf("the call ended with %v", err)
				}
				if e := f.next(t); e.Kind != hub.Asked || e.Request.Timeout != tc.want {
					t.Errorf("the hub was asked %v with timeout %s", e.Kind, e.Request.Timeout)
				}
			})
		})
	}
}

// TestAnswerReachesTheAgent: a question without an ID gets one; the
// names that say who asks reach the hub as one clean line each, as does
// the nickname of the device that answers, which the response header
// names; the answer is the call's response.
func TestAnswerReachesTheAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		req := question("", "Ship it?", 60)
		req.Request.AgentName = strings.Repeat("é", 100) // 200 bytes
		req.Request.ReasoningModelName = "gpt\x00-5\u2028"
		req.Request.McpClientName = "  claude\u202e  "
		ctx, info := headers(context.Background())
		asked := f.askAsync(ctx, req)
		synctest.Wait()

		e := f.next(t)
		r := e.Request
		if e.Kind != hub.Asked || len(r.ID) != 24 || r.Kind != wire.AskQuestion || r.Text != "Ship it?" || r.ProjectDirectory != "/src/app" {
			t.Fatalf("the hub was asked %v %+v", e.Kind, r)
		}
		if want := strings.Repeat("é", 64); r.AgentName != want || r.ReasoningModelName != "gpt-5" || r.McpClientName != "claude" {
			t.Errorf("names %q, %q, %q", r.AgentName, r.ReasoningModelName, r.McpClientName)
		}
		if r.Door != "connect" {
			t.Errorf("door %q", r.Door)
		}

		if err := f.answer(context.Background(), r.ID, "\u202e My phone\n", "Yes."); err != nil {
			t.Fatal(err)
		}
		got := <-asked
		if got.err != nil || got.resp.GetID() != r.ID || got.resp.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("the agent got %v, %v", got.resp, got.err)
		}
		if by := wire.DecodeAnsweredBy(info.ResponseHeader().Get(wire.AnsweredByHeader)); by != "My phone" {
			t.Errorf("answered by %q", by)
		}
		if e := f.next(t); e.Kind != hub.Answered || e.Reply.Nickname != "My phone" || e.Reply.Door != "connect" {
			t.Errorf("the hub heard %v by %q through %q", e.Kind, e.Reply.Nickname, e.Reply.Door)
		}
	})
}

// TestDoorIsTheServers: a call over the network comes through the door
// "connect"; the server's own calls in process (its /mcp endpoint's)
// through the door they name, with the token they checked, taking the
// answers given while they were away, and told who answered.
func TestDoorIsTheServers(t *testing.T) {
	t.Parallel()
	type ask func(f *fixture, req *pb.AskQuestionRequest) (by string, err error)
	for _, tc := range []struct {
		name     string
		ask      ask
		door     string
		withdraw bool
	}{
		{"over the network", func(f *fixture, req *pb.AskQuestionRequest) (string, error) {
			ctx, info := headers(context.Background())
			_, err := f.agent.AskQuestion(ctx, req)
			return wire.DecodeAnsweredBy(info.ResponseHeader().Get(wire.AnsweredByHeader)), err
		}, "connect", true},
		{"the server's own /mcp", func(f *fixture, req *pb.AskQuestionRequest) (string, error) {
			req.UserToken = "" // checked by the caller: the message's is not read
			_, by, err := f.services.Local("mcp", tokA).AskQuestion(context.Background(), req)
			return by, err
		}, "mcp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, setup{})
				done := make(chan error, 1)
				go func() {
					by, err := tc.ask(f, question("q", "Ship it?", 60))
					if err == nil && by != "My phone" {
						err = fmt.Errorf("answered by %q", by)
					}
					done <- err
				}()
				synctest.Wait()
				e := f.next(t)
				if e.Request.Door != tc.door || e.Token != tokA || e.Request.WithdrawOnLeave != tc.withdraw {
					t.Errorf("door %q, token %q, withdraw on leave %v; want %q, %q, %v",
						e.Request.Door, e.Token, e.Request.WithdrawOnLeave, tc.door, tokA, tc.withdraw)
				}
				if err := f.answer(context.Background(), "q", "My phone", "Yes."); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// TestWithdrawOnLeave: a call that does not say it takes missed answers
// (wire.TakesMissedHeader "1", as agentassistant-mcp does; upstream's
// bridge does not) has no way back to an answer given after it left, so
// its request is withdrawn when the call drops; with "1" it stays
// pending for the agent to come back.
func TestWithdrawOnLeave(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		header   []string
		withdraw bool
	}{
		{"no header", nil, true},
		{"1", []string{wire.TakesMissedHeader, wire.TakesMissedYes}, false},
		{"0", []string{wire.TakesMissedHeader, "0"}, true},
		{"true", []string{wire.TakesMissedHeader, "true"}, true},
		{"empty", []string{wire.TakesMissedHeader, ""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, setup{})
				ctx, leave := context.WithCancel(context.Background())
				ctx, _ = headers(ctx, tc.header...)
				asked := f.askAsync(ctx, question("q", "Ship it?", 60))
				synctest.Wait()
				if e := f.next(t); e.Request.WithdrawOnLeave != tc.withdraw {
					t.Errorf("asked with WithdrawOnLeave %v", e.Request.WithdrawOnLeave)
				}
				leave()
				if err := (<-asked).err; !errors.Is(err, context.Canceled) {
					t.Fatalf("the call ended with %v", err)
				}
				synctest.Wait()
				if pending := f.hub.Validity(tokA, []string{"q"})["q"]; pending == tc.withdraw {
					t.Errorf("pending after the call dropped: %v", pending)
				}
			})
		})
	}
}

// TestTokenIsTheRoom: a call acts in its token's room only: another
// room's token can neither cancel nor answer a request, nor take its
// answer; its own can.
func TestTokenIsTheRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		asked := f.askAsync(context.Background(), question("q", "Ship it?", 60))
		synctest.Wait()
		ctx := context.Background()
		if _, err := f.control.CancelRequest(ctx, &pb.CancelRequestRequest{UserToken: tokB, ID: "q"}); codeOf(err) != "failed_precondition" {
			t.Errorf("cancelled from room B: %v", err)
		}
		_, err := f.reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: tokB, Response: &pb.AskQuestionResponse{ID: "q"}})
		if codeOf(err) != "failed_precondition" || !strings.Contains(err.Error(), hub.ErrNotPending.Error()) {
			t.Errorf("answered from room B: %v", err)
		}
		if !f.hub.Validity(tokA, []string{"q"})["q"] {
			t.Fatal("room B settled room A's request")
		}
		if err := f.answer(ctx, "q", "phone", "Yes."); err != nil {
			t.Fatal(err)
		}
		if got := <-asked; got.err != nil {
			t.Fatal(got.err)
		}
	})
}

// TestArgumentsAreChecked: what a call must say, and how much it may,
// is checked before the hub hears of it.
func TestArgumentsAreChecked(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	task := func(summary string) *pb.TaskFinishRequest {
		return &pb.TaskFinishRequest{UserToken: tokA, Request: &pb.McpTaskFinishRequest{Summary: summary}}
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		call func(context.Context) error
		want string
		says string
	}{
		{"an empty question", func(ctx context.Context) error {
			_, err := f.agent.AskQuestion(ctx, question("q", "", 60))
			return err
		}, "invalid_argument", "Question is empty"},
		{"a blank question", func(ctx context.Context) error {
			_, err := f.agent.AskQuestion(ctx, question("q", " \n\t", 60))
			return err
		}, "invalid_argument", "Question is empty"},
		{"an empty summary", func(ctx context.Context) error {
			_, err := f.agent.TaskFinish(ctx, task(""))
			return err
		}, "invalid_argument", "Summary is empty"},
		{"an empty work report", func(ctx context.Context) error {
			_, err := f.agent.WorkReport(ctx, &pb.WorkReportRequest{UserToken: tokA, Request: &pb.McpWorkReportRequest{}})
			return err
		}, "invalid_argument", "Summary is empty"},
		{"an ID of 129 bytes", func(ctx context.Context) error {
			_, err := f.agent.AskQuestion(ctx, question(strings.Repeat("i", 129), "Ship it?", 60))
			return err
		}, "invalid_argument", "ID longer than 128 bytes"},
		{"an answer without an ID", func(ctx context.Context) error {
			return f.answer(ctx, "", "phone", "Yes.")
		}, "invalid_argument", "Response.ID is empty"},
		{"a report's answer without an ID", func(ctx context.Context) error {
			_, err := f.reply.TaskFinishReply(ctx, &pb.TaskFinishReplyRequest{UserToken: tokA, Response: &pb.TaskFinishResponse{}})
			return err
		}, "invalid_argument", "Response.ID is empty"},
		{"an answer to no request", func(ctx context.Context) error {
			return f.answer(ctx, "nothing", "phone", "Yes.")
		}, "failed_precondition", "request nothing: " + hub.ErrNotPending.Error()},
		{"a cancel of no request", func(ctx context.Context) error {
			_, err := f.control.CancelRequest(ctx, &pb.CancelRequestRequest{UserToken: tokA, ID: "nothing"})
			return err
		}, "failed_precondition", "request nothing: " + hub.ErrNotPending.Error()},
		{"257 IDs to leave alone", func(ctx context.Context) error {
			_, err := f.control.TakeMissedAnswers(ctx, &pb.TakeMissedAnswersRequest{UserToken: tokA, ExceptIds: ids(257)})
			return err
		}, "invalid_argument", "more than 256 except_ids"},
		{"256 IDs to leave alone", func(ctx context.Context) error {
			_, err := f.control.TakeMissedAnswers(ctx, &pb.TakeMissedAnswersRequest{UserToken: tokA, ExceptIds: ids(256)})
			return err
		}, "ok", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call(context.Background())
			if got := codeOf(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
	t.Cleanup(func() { // after the subtests: none of them reached the hub
		select {
		case e := <-f.events:
			t.Errorf("the hub heard %v of %+v", e.Kind, e.Request)
		default:
		}
	})
}

// TestLongestID: an ID of 128 bytes, the longest, is the request's.
func TestLongestID(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		id := strings.Repeat("i", 128)
		f.askAsync(context.Background(), question(id, "Ship it?", 60))
		synctest.Wait()
		if !f.hub.Validity(tokA, []string{id})[id] {
			t.Fatal("not pending")
		}
	})
}
