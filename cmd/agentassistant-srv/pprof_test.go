package main

import (
	"encoding/json"
	"net/http/httptest"
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
