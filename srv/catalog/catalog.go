// Package catalog serves the movie-booking host's catalog: films, dates,
// showtimes, prices and seat maps. A small realistic default is embedded;
// a study can point the server at its own JSON file.
package catalog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
)

//go:embed default.json
var defaultCatalog []byte

// Load returns the catalog at path, or the embedded default when path is
// empty. The file must be a JSON object with at least movies, dates and
// showtimes.
func Load(path string) ([]byte, error) {
	if path == "" {
		return defaultCatalog, nil
	}
	b, err := os.ReadFile(path) // #nosec G304 -- a file the operator configured
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	var c struct {
		Movies    []json.RawMessage `json:"movies"`
		Dates     []json.RawMessage `json:"dates"`
		Showtimes []json.RawMessage `json:"showtimes"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	if len(c.Movies) == 0 || len(c.Dates) == 0 || len(c.Showtimes) == 0 {
		return nil, errors.New("catalog " + path + ": needs movies, dates and showtimes")
	}
	return b, nil
}

// Handler serves the catalog. The server mounts it behind the token check
// (the catalog is the host's backend data).
func Handler(catalog []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(catalog)
	})
}
