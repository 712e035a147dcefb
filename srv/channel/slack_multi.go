package channel

import (
	"strconv"

	"github.com/slack-go/slack"
)

// A question that takes several of its options (multi_select) shows a
// checkboxes element with its options and a Send button. Slack keeps
// the boxes ticked in the message, on the person's side, and hands
// their state with every block_actions payload (state.values): Send
// reads them there, so they need no state of the server's and survive
// its restart, or another instance of the cluster taking the
// connection. A tick itself sends a block_actions payload too, which
// answers nothing.

// slackTickElements are the elements of the answers block of a
// question taking several of labels, tagged tag: the boxes (each
// option's value "t:<index>:<tag>", its text at most 75 characters,
// Block Kit's bound; at most 10 options, as a question has) and Send
// ("s:<tag>").
func slackTickElements(labels []string, tag string) []slack.BlockElement {
	opts := make([]*slack.OptionBlockObject, len(labels))
	for i, l := range labels {
		opts[i] = slack.NewOptionBlockObject("t:"+strconv.Itoa(i)+":"+tag, slackText(Clip(l, maxSlackButton)), nil)
	}
	return []slack.BlockElement{
		slack.NewCheckboxGroupsBlockElement("ticks", opts...),
		slack.NewButtonBlockElement("send", "s:"+tag, slackText("Send")),
	}
}

// slackTicks are the boxes ticked in state, by option index, of labels.
func slackTicks(state *slack.BlockActionStates, labels []string) []bool {
	on := make([]bool, len(labels))
	if state == nil {
		return on
	}
	for _, block := range state.Values {
		for _, act := range block {
			if act.Type != slack.ActionType(slack.METCheckboxGroups) {
				continue
			}
			for _, o := range act.SelectedOptions {
				if what, i, ok := tapOf(o.Value); ok && what == 't' && i < len(on) {
					on[i] = true
				}
			}
		}
	}
	return on
}
