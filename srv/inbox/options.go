package inbox

import (
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// The options of a request, for the clients that do not show them
// (upstream's web UI and Flutter app, which know nothing of a request's
// Questions, field 7): their frames of a request asked with options say
// them in the text, so the person there can answer with one by typing
// its label. A client that says at login it shows them (ShowsOptions,
// as this project's UI does) is given the text as asked. The text is
// wire.OptionsText's, which agentassistant-mcp also writes for a server
// of the existing agentassistant. wire.CheckOptions refuses labels that
// break a line; a request kept from before, or asked by a caller that
// checks nothing, still meets them.

// encodeOptionsInText is n's frames with the options in the text. ok is
// false when they are n's frames for every client (n.Encoded).
func encodeOptionsInText(n *hub.Note) (bs [][]byte, ok bool) {
	extra := wire.OptionsText(n.Request.Questions)
	if n.Kind != hub.NoteAsked || extra == "" {
		return nil, false
	}
	ms := Messages(n) // built afresh, not the note's shared frames
	for _, m := range ms {
		if q := m.GetAskQuestionRequest().GetRequest(); q != nil {
			q.Question = n.Request.Text + extra
		}
		if r := m.GetTaskFinishRequest().GetRequest(); r != nil {
			r.Summary = n.Request.Text + extra // both generations' frames share it
		}
	}
	bs = make([][]byte, len(ms))
	for i, m := range ms {
		bs[i] = marshal(m)
	}
	return bs, true
}
