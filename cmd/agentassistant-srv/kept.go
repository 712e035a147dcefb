package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentassistant/agentassistant/srv/inbox"
)

// keptFile holds, across a restart, what inbox.Handler.Kept remembers: the requests
// each page of upstream's web UI still shows (by room digest and
// nickname), so the page that reconnects to the new process is not pushed
// them again as second cards. Written at shutdown, read and removed at the
// next start.
const keptFile = "upstream-cards.json"

// saveKept writes h's memory into dir.
func saveKept(dir string, h *inbox.Handler) error {
	kept := h.Kept()
	path := filepath.Join(dir, keptFile)
	if len(kept) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", keptFile, err)
		}
		return nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return fmt.Errorf("encode %s: %w", keptFile, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keptFile, err)
	}
	return nil
}

// loadKept gives h what the last run saved in dir, for tokens' rooms, and
// removes the file: it describes the pages of the last shutdown only.
func loadKept(dir string, h *inbox.Handler, tokens []string) error {
	path := filepath.Join(dir, keptFile)
	b, err := os.ReadFile(path) // #nosec G304 -- a fixed name in the operator's data directory
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", keptFile, err)
	}
	var kept map[string]map[string][]string
	if err := json.Unmarshal(b, &kept); err != nil {
		return fmt.Errorf("decode %s: %w", keptFile, err)
	}
	h.SetKept(tokens, kept)
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", keptFile, err)
	}
	return nil
}
