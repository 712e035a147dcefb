package wire_test

import (
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestChosen: texts naming an option's label are choices, told in the
// order offered; the others are free text, in the order given.
func TestChosen(t *testing.T) {
	opts := []*pb.Option{{Label: "A"}, {Label: "B"}, {Label: "C"}}
	chosen, free := wire.Chosen(opts, []string{"C", "why not", "A", "a", "C"})
	if strings.Join(chosen, "|") != "A|C" || strings.Join(free, "|") != "why not|a" {
		t.Errorf("chosen %q, free %q", chosen, free)
	}
	if chosen, free := wire.Chosen(nil, []string{"A"}); chosen != nil || strings.Join(free, "|") != "A" {
		t.Errorf("without options: chosen %q, free %q", chosen, free)
	}
}

func TestCheckOptionsBounds(t *testing.T) {
	ok := []*pb.Option{{Label: strings.Repeat("x", wire.MaxLabelBytes), Description: strings.Repeat("d", wire.MaxDescriptionBytes)}}
	if err := wire.CheckOptions(ok); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if err := wire.CheckOptions([]*pb.Option{{Label: "\xff"}}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}
