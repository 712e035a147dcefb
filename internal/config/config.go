// Package config is the one way the binaries read their settings: defaults,
// then the TOML file, then the flags given (Flags). Only the mains use it:
// libraries take typed option structs.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// AppDir is the per-user directory, under os.UserConfigDir, where the
// binaries look for their config and the server keeps its data by default.
func AppDir() string {
	d, err := os.UserConfigDir()
	if err != nil {
		d = "."
	}
	return filepath.Join(d, "agentassistant")
}

// Find returns the config file to read: explicit when given (it must
// exist), else name in the working directory, else name in AppDir. It
// returns "" when there is none, which is fine: flags and defaults apply.
func Find(explicit, name string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("config file: %w", err)
		}
		return explicit, nil
	}
	for _, p := range []string{name, filepath.Join(AppDir(), name)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", nil
}

// Load decodes the TOML file at path into v. Unknown keys are an error, so
// a misspelt setting does not pass silently.
func Load(path string, v any) error {
	_, err := decode(path, v, true)
	return err
}

// decode is Load, saying which keys the file defined; with strict false,
// the file may hold keys v does not have (a file shared with another
// binary: they are that one's business).
func decode(path string, v any, strict bool) (map[string]bool, error) {
	md, err := toml.DecodeFile(path, v)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if und := md.Undecoded(); strict && len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("read config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	defined := make(map[string]bool)
	for _, k := range md.Keys() {
		defined[k.String()] = true
	}
	return defined, nil
}
