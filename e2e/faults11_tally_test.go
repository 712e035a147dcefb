//go:build unix

package e2e

import (
	"fmt"
	"sort"
	"testing"
)

// ntfyTally is what a round's ntfy double was published, by sequence
// ID: questions (with actions) and outcomes (without).
type ntfyTally struct {
	asked, settled int
	// unasked: sequences with an outcome and no question; twice: with
	// more than one outcome; again: with more than one question; odd
	// names them, with their counts.
	unasked, twice, again int
	// unsettled: sequences with a question and no outcome (a follow-up
	// not made), told, not checked.
	unsettled int
	odd       []string
	// unnamed: outcomes published with no sequence ID. This release
	// names every notice of a question (Notice.Seq); the release before
	// it named none of the follow-ups it made from a note (its lease
	// holder's scan of the follow-ups owed), so those of one round are
	// told apart from the others, not pooled as one sequence's.
	unnamed int
}

// tallyNtfy counts msgs.
func tallyNtfy(msgs []map[string]any) ntfyTally {
	var tl ntfyTally
	bySeq := map[string][2]int{} // questions, outcomes
	for _, m := range msgs {
		seq, _ := m["sequence_id"].(string)
		_, question := m["actions"]
		if seq == "" && !question {
			tl.unnamed++
			continue
		}
		c := bySeq[seq]
		if question {
			c[0]++
		} else {
			c[1]++
		}
		bySeq[seq] = c
	}
	for seq, c := range bySeq {
		tl.asked += c[0]
		tl.settled += c[1]
		if c[1] > 0 && c[0] == 0 {
			tl.unasked++
		}
		if c[1] > 1 {
			tl.twice++
		}
		if c[0] > 1 {
			tl.again++
		}
		if c[0] > 0 && c[1] == 0 {
			tl.unsettled++
		}
		if c[1] > 0 && c[0] == 0 || c[1] > 1 || c[0] > 1 {
			tl.odd = append(tl.odd, fmt.Sprintf("%q: %d questions, %d outcomes", seq, c[0], c[1]))
		}
	}
	sort.Strings(tl.odd)
	return tl
}

// TestTallyNtfyUnnamedApart: two outcomes published with no sequence ID
// (the previous release's follow-ups made from notes, of two questions)
// are not one sequence's outcome twice, nor one without its question;
// a named sequence's second outcome, or outcome with no question, is.
func TestTallyNtfyUnnamedApart(t *testing.T) {
	q := func(seq string) map[string]any { return map[string]any{"sequence_id": seq, "actions": []any{}} }
	o := func(seq string) map[string]any {
		if seq == "" {
			return map[string]any{"message": "No answer is needed any more."}
		}
		return map[string]any{"sequence_id": seq, "message": "No answer is needed any more."}
	}
	tl := tallyNtfy([]map[string]any{q("a"), o("a"), o(""), q("b"), o("b"), o("b"), o(""), o("c"), q("d"), q("e"), q("e")})
	got := [7]int{tl.asked, tl.settled, tl.unasked, tl.twice, tl.again, tl.unsettled, tl.unnamed}
	want := [7]int{5, 4, 1, 1, 1, 2, 2} // b twice, c unasked, d and e unsettled, e again
	if got != want {
		t.Errorf("asked, settled, unasked, twice, again, unsettled, unnamed = %v, want %v (%v)", got, want, tl.odd)
	}
}
