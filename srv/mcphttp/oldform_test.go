package mcphttp

import (
	"bufio"
	"strings"
	"testing"
)

// TestResumeFromEarlierReleaseID: during a rolling upgrade a client may
// hold an event ID an instance of the release before gave: its own form,
// "<tag>-<n>.<claims>", never "@<origin tag>-<m>", of a log no instance
// of this release keeps, its claims naming no run. Whichever instance
// it resumes through, the one where the call began or another, resumes
// the call (not 400): its stream's first event is of that instance's
// log, and the person's answer is the call's response, once.
func TestResumeFromEarlierReleaseID(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int
	}{{"another instance", 1}, {"where the call began", 0}} {
		at := tc.at
		t.Run(tc.name, func(t *testing.T) {
			be := newAsker()
			_, bases := newRelayPeers(t, 2, be)
			sid := dial(t, bases[0], "token-a", "").GetSessionId()
			last := askAndCutSigned(t, be, bases[0], sid, true)
			signer := eventSigner{key: deriveKey(sharedKey, eventIDLabel), token: "token-a", sid: sid}
			_, _, sig, _ := parseEventID(last)
			c, err := signer.verify(sig)
			if err != nil {
				t.Fatal(err)
			}
			c.Run = "" // as the release before signed them
			old := "kkkkkkkkkk-5." + signer.sign(c)

			resp := getFrom(t, bases[at], sid, old)
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			first, err := next(r)
			if err != nil {
				t.Fatal(err)
			}
			if tag, _, sig, err := parseEventID(first.id); err != nil || tag == "kkkkkkkkkk" || sig == "" {
				t.Fatalf("the resumed stream's first event %+v", first)
			}
			be.await(func() bool { return len(be.ids) == 1 && be.waiting[be.ids[0]] >= 1 })
			be.answer(0, "go ahead")
			responses := 0
			for {
				ev, err := next(r)
				if err != nil {
					break
				}
				if strings.Contains(ev.data, `"id":7`) {
					responses++
					if !strings.Contains(ev.data, "go ahead") {
						t.Fatalf("the call's response: %s", ev.data)
					}
				}
			}
			if responses != 1 {
				t.Fatalf("the call's response came %d times", responses)
			}
		})
	}
}
