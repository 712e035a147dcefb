package answercap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/srv/datadir"
)

// Capabilities of one process that outlive it: a notification's button,
// an e-mail's link or a chat message's keyboard made before a restart (a
// kill -9 included) still answers after it. They are signed as a
// cluster's are (shared.go), with a key kept in the data directory, and
// claimed in memory: a restart forgets which were used, and the hub,
// whose first answer wins and is on disk before it is told, refuses a
// second answer to a settled question all the same. So a capability
// whose answer was never saved (the server died first) answers again
// after the restart, and one whose answer was saved is refused (409).

// KeyFileName is the file, in the data directory, holding the key that
// signs one process's capabilities.
const KeyFileName = "capability.key"

// keySize is the key's length in bytes.
const keySize = 32

// LoadOrCreateKey reads the key in dir, or makes one and keeps it there
// (readable by its owner only, on disk before it returns).
func LoadOrCreateKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, KeyFileName)
	b, err := os.ReadFile(path) // #nosec G304 -- the data directory's own file
	switch {
	case err == nil:
		if len(b) != keySize {
			return nil, fmt.Errorf("read %s: not a capability key (remove it to make a new one; the buttons of notifications sent before then stop answering)", path)
		}
		return b, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read the capability key: %w", err)
	}
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make the capability key: %w", err)
	}
	if err := datadir.WriteFile(path, key); err != nil {
		return nil, fmt.Errorf("keep the capability key: %w", err)
	}
	return key, nil
}

// MemoryClaims are the claims of one process. Safe for concurrent use.
type MemoryClaims struct {
	now func() time.Time
	mu  sync.Mutex // held alone
	m   map[string]time.Time
}

// NewMemoryClaims returns no claims; now is the clock (nil: time.Now).
func NewMemoryClaims(now func() time.Time) *MemoryClaims {
	opt.Clock(&now)
	return &MemoryClaims{now: now, m: map[string]time.Time{}}
}

// Claim marks nonce used until until; false when it is already. At
// maxCaps claims the expired go, then the one to expire first (its
// capability then answers again, and the hub refuses it once its
// question is settled).
func (c *MemoryClaims) Claim(_ context.Context, nonce string, until time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if u, ok := c.m[nonce]; ok && now.Before(u) {
		return false, nil
	}
	if len(c.m) >= maxCaps {
		first := ""
		for n, u := range c.m {
			if !now.Before(u) {
				delete(c.m, n)
			} else if first == "" || u.Before(c.m[first]) {
				first = n
			}
		}
		if len(c.m) >= maxCaps {
			delete(c.m, first)
		}
	}
	c.m[nonce] = until
	return true, nil
}

// Release forgets the claim of nonce.
func (c *MemoryClaims) Release(_ context.Context, nonce string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, nonce)
	return nil
}
