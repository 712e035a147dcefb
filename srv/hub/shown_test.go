package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestCapabilityAnswersWhatItsQuestionShowed: a capability's answer
// (Reply.Of) takes the question whose shown digest it holds, not one
// whose options say otherwise under the same ID and text. One of the
// previous release, which holds the digest of the kind, project and
// text only, answers as it did there until it expires: a question
// pending since before the restart, and one asked since (in a cluster
// upgraded an instance at a time, those of the previous release make
// them yet).
func TestCapabilityAnswersWhatItsQuestionShowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		yes := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}}
		req := func(id, desc string) Request {
			return Request{Kind: wire.AskQuestion, ID: id, Text: "Drop the database?", ProjectDirectory: "/src/shop", Timeout: time.Hour,
				Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Yes", Description: desc}, {Label: "No"}}}}}
		}
		shownOf := func(r Request) [32]byte { return r.Shown() }
		digestOf := func(r Request) [32]byte { return r.Digest() }
		h, restart := restartable(t)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _ = h.Ask(ctx, "tok", req("before", "the staging one")) }()
		synctest.Wait()
		h.Close()
		cancel()
		time.Sleep(time.Minute) // the restart
		h2, _ := restart()
		restored(t, h2)
		go func() { _, _ = h2.Ask(context.Background(), "tok", req("since", "the production one")) }()
		synctest.Wait()

		for _, c := range []struct {
			name string
			id   string
			of   [32]byte
			want error
		}{
			{"what the other question showed", "since", shownOf(req("since", "the staging one")), ErrNotPending},
			{"the previous release's, for a question asked since", "since", digestOf(req("since", "the production one")), nil},
			{"what it showed", "since", shownOf(req("since", "the production one")), nil},
			{"the previous release's, for a question from before the restart", "before", digestOf(req("before", "the staging one")), nil},
		} {
			err := h2.Allows(context.Background(), "tok", wire.AskQuestion, c.id, Reply{Contents: yes, Of: c.of})
			if !errors.Is(err, c.want) && (err != nil || c.want != nil) {
				t.Errorf("a capability of %s: %v, want %v", c.name, err, c.want)
			}
		}
	})
}
