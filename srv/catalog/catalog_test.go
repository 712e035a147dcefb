package catalog_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/srv/catalog"
)

func TestDefaultCatalogHasWhatTheHostNeeds(t *testing.T) {
	b, err := catalog.Load("")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Movies    []json.RawMessage `json:"movies"`
		Dates     []json.RawMessage `json:"dates"`
		Showtimes []json.RawMessage `json:"showtimes"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("the embedded catalog: %v", err)
	}
	if len(c.Movies) == 0 || len(c.Dates) == 0 || len(c.Showtimes) == 0 {
		t.Errorf("the embedded catalog: %d movies, %d dates, %d showtimes", len(c.Movies), len(c.Dates), len(c.Showtimes))
	}
}

func TestLoadRefusesWhatCannotServe(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not json":      `{"movies": [`,
		"no showtimes":  `{"movies": [{}], "dates": ["2026-01-01"]}`,
		"empty dates":   `{"movies": [{}], "dates": [], "showtimes": [{}]}`,
		"not an object": `[1, 2]`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
	if _, err := catalog.Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was loaded")
	}
}

func TestLoadAndServeAStudysCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "study.json")
	body := `{"movies": [{"id": "m1"}], "dates": ["2026-01-01"], "showtimes": [{"movieId": "m1"}]}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	catalog.Handler(b).ServeHTTP(rec, httptest.NewRequest("GET", "/catalog", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != body {
		t.Errorf("served %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}
