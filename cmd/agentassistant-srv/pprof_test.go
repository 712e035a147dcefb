package main

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/srv/auth"
)

func TestMemoryClassesAreReported(t *testing.T) {
	rec := httptest.NewRecorder()
	memoryClasses(rec, httptest.NewRequest("GET", "/debug/memory", nil))
	var m map[string]uint64
	if err := json.NewDecoder(rec.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	total := m["/memory/classes/total:bytes"]
	var parts uint64
	for k, v := range m {
		if k != "/memory/classes/total:bytes" {
			parts += v
		}
	}
	if total == 0 || m["/memory/classes/heap/objects:bytes"] == 0 || parts != total {
		t.Fatalf("total %d, objects %d, parts add up to %d", total, m["/memory/classes/heap/objects:bytes"], parts)
	}
}

func TestProfilesOnlyOnLoopback(t *testing.T) {
	if _, err := servePprof("0.0.0.0:0", &auth.Guard{}, nil); err == nil {
		t.Fatal("profiles were served on every interface")
	}
}

// TestProfilesStopWaitsForTheirServer: the profiles' listener is served
// by a goroutine of servePprof's, which stop waits for: none is left
// serving once it returns.
func TestProfilesStopWaitsForTheirServer(t *testing.T) {
	stop, err := servePprof("127.0.0.1:0", &auth.Guard{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "servePprof") {
		t.Fatalf("a goroutine of servePprof outlived stop:\n%s", stacks)
	}
}
