package mcphttp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestResumedStreamSharedAtOnce: a second GET that resumes, through
// this instance, a call another instance began finds the stream the
// first one opened (openResumed: not fresh) and takes it over from its
// first event. It may come before the first GET has written anything:
// the stream's first event and the signed part of its IDs are there from
// the moment it is shared, not a number 0 that no ID has (400).
func TestResumedStreamSharedAtOnce(t *testing.T) {
	l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, true)
	first, fresh := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "claims.sig", eventPos{tag: "origin", n: 3})
	if !fresh {
		t.Fatal("the first resume found a stream")
	}
	second, fresh := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "claims.sig", eventPos{tag: "origin", n: 3})
	if fresh || second != first {
		t.Fatal("the second resume of the request did not find the first's stream")
	}
	id := l.resumeAfter(second, eventPos{tag: "origin", n: 3})
	st, _, err := l.after(id)
	if err != nil || st != second {
		t.Fatalf("the resumed stream's first event %q: %v", id, err)
	}
	second.mu.Lock()
	next := second.idLocked(second.first, second.firstOrigin)
	second.mu.Unlock()
	if !strings.HasSuffix(next, "@origin-3.claims.sig") {
		t.Fatalf("an event of the shared stream is sent as %q, without the call's claims", next)
	}
}
