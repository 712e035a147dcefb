package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/agentassistant/agentassistant/srv/datadir"
)

// Keys are the server's VAPID key pair (RFC 8292), which push services
// use to know that the pushes to a subscription come from the server
// that made it. Made once and kept in the data directory: new keys would
// void every device's subscription.
type Keys struct {
	Public  string `json:"public"`  // base64url, the applicationServerKey
	Private string `json:"private"` // base64url; never logged or sent
}

// KeysFile is the keys' file in the data directory.
const KeysFile = "vapid.json"

// LoadOrCreateKeys reads the keys kept in dir, or makes and keeps them.
func LoadOrCreateKeys(dir string) (Keys, error) {
	path := filepath.Join(dir, KeysFile)
	b, err := os.ReadFile(path) // #nosec G304 -- the data directory's own file
	switch {
	case err == nil:
		var k Keys
		if err := json.Unmarshal(b, &k); err != nil || k.Public == "" || k.Private == "" {
			return Keys{}, fmt.Errorf("read %s: not the server's push keys (remove it to make new ones; every device then subscribes again)", path)
		}
		return k, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Keys{}, fmt.Errorf("read push keys: %w", err)
	}
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return Keys{}, fmt.Errorf("make push keys: %w", err)
	}
	k := Keys{Public: pub, Private: priv}
	b, _ = json.Marshal(k)
	if err := datadir.WriteFile(path, b); err != nil {
		return Keys{}, fmt.Errorf("keep push keys: %w", err)
	}
	return k, nil
}
