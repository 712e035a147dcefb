package channel

import (
	"context"
	"strings"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// several offers options of which several may be chosen, and words of
// one's own besides.
var several = []*pb.Question{{Options: []*pb.Option{{Label: "Web"}, {Label: "Mobile"}, {Label: "Desktop"}}, Multiple: true, Custom: true}}

// askSeveral asks token's room a question taking several of its options.
func (f *fixture) askSeveral(token, id string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), token, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Which platforms?",
			ProjectDirectory: "/srv/shop", AgentName: "Claude Code", Timeout: time.Hour, Questions: several})
		out <- rep
	}()
	return out
}

// texts are an answer's texts, one per content, as the agent reads them.
func texts(rep *hub.Reply) string {
	if rep == nil {
		return "<none>"
	}
	var out []string
	for _, c := range rep.Contents {
		out = append(out, c.GetText().GetText())
	}
	return strings.Join(out, "|")
}
