package mcpbridge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// handOver fetches the answers the person gave while no agent waited for
// them (an earlier agentassistant-mcp of this project went away mid-call)
// and returns them in place of making the call: they may well settle what
// the agent is about to ask, and the person is not asked twice. It returns
// nil when there are none, or the server cannot say (an older server, or
// none reachable: the call itself reports that). tool is the tool called,
// which the agent is told to call again.
func (b *bridge) handOver(ctx context.Context, kind wire.Kind, tool, dir string) *mcp.CallToolResult {
	b.mu.Lock()
	except := slices.Collect(maps.Keys(b.waiting))
	b.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.be.TakeMissedAnswers(tctx, &pb.TakeMissedAnswersRequest{UserToken: b.o.Token, ProjectDirectory: dir, ExceptIds: except})
	if err != nil {
		b.log.Debug("take missed answers", "err", err)
		if ctx.Err() == nil && tctx.Err() != nil {
			b.leaveIfStalled(ctx)
		}
		return nil
	}
	if len(resp.GetAnswers()) == 0 {
		return nil
	}
	b.log.Info("handing over answers given while no agent waited", "count", len(resp.GetAnswers()))
	return missedResult(kind, tool, resp.GetAnswers(), time.Now())
}

// missedResult is the tool result that hands over answers given while no
// agent waited, instead of the call of kind to tool.
func missedResult(kind wire.Kind, tool string, as []*pb.MissedAnswer, now time.Time) *mcp.CallToolResult {
	// Nothing was asked: the structured content (the tools' outputSchema)
	// says so.
	res := &mcp.CallToolResult{StructuredContent: answer{Chosen: []string{}}}
	images := maxAnswerImages // the answers' images, in all
	for _, a := range as {
		akind := wire.AskQuestion
		if a.GetMessageType() == wire.TaskFinish.String() {
			akind = wire.TaskFinish
		}
		by := ""
		if a.GetAnsweredBy() != "" {
			by = " on " + a.GetAnsweredBy()
		}
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf(
			"While no agent was waiting for it, the person answered an earlier %s from this project (asked %s ago, answered %s ago%s). The %s was:\n\n%s\n\nTheir answer:",
			kindWord(akind), ago(now.Sub(time.UnixMilli(a.GetCreatedAt()))), ago(now.Sub(time.UnixMilli(a.GetAnsweredAt()))), by,
			kindWord(akind), quote(a.GetText()))))
		res.Content = append(res.Content, toResultWithin(akind, a.GetResponse(), nil, &images).Content...)
	}
	if kind == wire.TaskFinish {
		res.Content = append(res.Content, mcp.NewTextContent(
			"Your task report was not shown to the person yet: call "+tool+" again to report it."))
	} else {
		res.Content = append(res.Content, mcp.NewTextContent(
			"Your new question was not shown to the person: if the answer above does not settle it, call "+tool+" again."))
	}
	return res
}

// quote quotes markdown as a block, cut to a length that recalls it.
func quote(s string) string {
	const max = 600
	if r := []rune(strings.TrimSpace(s)); len(r) > max {
		s = string(r[:max]) + " …"
	}
	return "> " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n> ")
}

// ago is a duration as people say it.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}

// leaveIfStalled probes the server, which has just let a call run out
// without a word (paused, frozen), and moves on from it if it does not
// answer either: the call about to be made would otherwise wait there
// until the stall watch finds it stalled, two probes later.
func (b *bridge) leaveIfStalled(ctx context.Context) {
	if b.o.Probe == nil {
		return
	}
	skip, err := b.o.Probe(ctx)
	if err == nil || ctx.Err() != nil {
		return
	}
	b.log.Warn("the server stopped answering; the call goes to the next", "err", err)
	if skip != nil {
		skip()
	}
}
