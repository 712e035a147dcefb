package inbox

import (
	"strings"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// The options of a request, for the older web UI (upstream's), which
// shows a request's text and knows nothing of its options (field 7): its
// frames of a request asked with options say them in the text, so the
// person there can answer with one by typing its label. This project's
// UI shows them as buttons and is given the text as asked.

// encodeOlder is n's frames as the older web UI is given them: those of
// a request asked with options name them after its text. ok is false
// when they are n's frames for every client (n.Encoded).
func encodeOlder(n *hub.Note) (bs [][]byte, ok bool) {
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
		b.WriteString("\n- " + o.GetLabel())
		if d := o.GetDescription(); d != "" {
			b.WriteString(" (" + d + ")")
		}
	}
	if custom {
		b.WriteString("\n\nOr answer in your own words.")
	}
	return b.String()
}
