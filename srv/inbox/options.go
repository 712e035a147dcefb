package inbox

import (
	"strings"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// The options of a request, for the clients that do not show them
// (upstream's web UI and Flutter app, which know nothing of a request's
// Questions, field 7): their frames of a request asked with options say
// them in the text, so the person there can answer with one by typing
// its label. A client that says at login it shows them (ShowsOptions,
// as this project's UI does) is given the text as asked. Each option is
// one line under the one heading written here: a label or description
// that would break the line (or turn it around) is written as one line
// (wire.OneLine), so no option reads as two, nor as that heading.
// wire.CheckOptions refuses such labels; a request kept from before, or
// asked by a caller that checks nothing, still meets this.

// encodeOptionsInText is n's frames with the options in the text. ok is
// false when they are n's frames for every client (n.Encoded).
func encodeOptionsInText(n *hub.Note) (bs [][]byte, ok bool) {
	extra := optionsText(n)
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

// optionsText is the options of n's request as text to follow its own,
// "" when it offers none.
func optionsText(n *hub.Note) string {
	opts, multiple, custom := wire.OptionsOf(n.Request.Questions)
	if len(opts) == 0 {
		return ""
	}
	var b strings.Builder
	if multiple {
		b.WriteString("\n\nAnswer with one or more of:")
	} else {
		b.WriteString("\n\nAnswer with one of:")
	}
	for _, o := range opts {
		l := wire.OneLine(o.GetLabel())
		if l == "" {
			continue // nothing a person could type back
		}
		b.WriteString("\n- " + l)
		if d := wire.OneLine(o.GetDescription()); d != "" {
			b.WriteString(" (" + d + ")")
		}
	}
	if custom {
		b.WriteString("\n\nOr answer in your own words.")
	}
	return b.String()
}
