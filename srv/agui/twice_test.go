package agui

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestResultTwiceInOneRun: a run that answers one tool call twice, with
// two different results, is refused as a whole (RUN_ERROR
// invalid_tool_result, nothing delivered): the agent would get one of
// them and the frontend never learn which. The call still waits, and a
// run with one result answers it.
func TestResultTwiceInOneRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		res, id := a.phaseOne()
		// A refusal comes at once; the bound only ends a run that took them.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		evs := a.post(ctx, "r2",
			map[string]any{"id": "t1", "role": "tool", "toolCallId": id, "content": "red"},
			map[string]any{"id": "t2", "role": "tool", "toolCallId": id, "content": "blue"})
		if last := evs[len(evs)-1]; last["type"] != RunError || last["code"] != codeInvalidResult ||
			!strings.Contains(last["message"].(string), "twice") {
			t.Fatalf("two results for one call: %v", evs)
		}
		synctest.Wait()
		select {
		case rep := <-res:
			t.Fatalf("the call was answered by a refused run: %s %s", rep.Type, rep.Payload)
		default:
		}
		go a.post(context.Background(), "r3", map[string]any{"id": "t3", "role": "tool", "toolCallId": id, "content": "blue"})
		if rep := <-res; !strings.Contains(string(rep.Payload), `"result":"blue"`) {
			t.Fatalf("the call's answer: %s %s", rep.Type, rep.Payload)
		}
	})
}
