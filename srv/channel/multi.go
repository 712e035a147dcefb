package channel

import (
	"strconv"
	"strings"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// A question may take several of its options (multi_select). The inbox
// answers it with one text content per option ticked, in the order
// offered; every channel answers the same, so that the agent reads one
// shape whatever door the person used.

// multiOf reports whether req offers options of which several may be
// chosen together.
func multiOf(req hub.Request) bool {
	opts, multiple, _ := wire.OptionsOf(req.Questions)
	return multiple && len(opts) > 0
}

// ticked are the labels whose box is ticked (on, by index), in the
// order offered.
func ticked(labels []string, on []bool) []string {
	var out []string
	for i, l := range labels {
		if on[i] {
			out = append(out, l)
		}
	}
	return out
}

// choiceContents are the labels as an answer's contents, one text each.
func choiceContents(labels []string) []*pb.McpResultContent {
	out := make([]*pb.McpResultContent, len(labels))
	for i, l := range labels {
		out[i] = textContent(l)
	}
	return out
}

// namedChoices are the labels a typed answer names ("Web, Mobile", a
// label a line, whatever their case; with numbered, also "1, 3": the
// options' numbers where the message numbers them), in the order
// offered, when it names options and nothing else; nil otherwise (words
// of one's own, answered as they are). A label is read before a number:
// an option labelled "2" is that option.
func namedChoices(labels []string, text string, numbered bool) []string {
	opts := make([]*pb.Option, len(labels))
	for i, l := range labels {
		opts[i] = &pb.Option{Label: l}
	}
	if chosen, free := wire.Chosen(opts, []string{strings.TrimSpace(text)}); len(free) == 0 {
		return chosen
	}
	if !numbered {
		return nil
	}
	picked := map[string]bool{}
	for part := range strings.FieldsFuncSeq(text, func(r rune) bool { return r == ',' || r == '\n' || r == ';' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if chosen, free := wire.Chosen(opts, []string{part}); len(free) == 0 && len(chosen) > 0 {
			for _, l := range chosen {
				picked[l] = true
			}
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(part, "."))
		if err != nil || n < 1 || n > len(labels) {
			return nil
		}
		picked[labels[n-1]] = true
	}
	var out []string
	for _, l := range labels {
		if picked[l] {
			out = append(out, l)
		}
	}
	return out
}

// typedContents is a typed answer to a question asking labels: with
// multi, the options it names, one text each; else text as it is.
func typedContents(labels []string, multi, numbered bool, text string) []*pb.McpResultContent {
	if multi {
		if chosen := namedChoices(labels, text, numbered); len(chosen) > 0 {
			return choiceContents(chosen)
		}
	}
	return []*pb.McpResultContent{textContent(text)}
}
