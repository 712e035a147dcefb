// Package config is the one way the binaries read their settings: defaults,
// then the TOML file, then the flags given (Flags). Only the mains use it:
// libraries take typed option structs.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"

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

// decode decodes the TOML file at path into v, saying which keys the
// file defined. With strict, unknown keys are an error, so a misspelt
// setting does not pass silently; without, the file may hold keys v does
// not have (a file shared with another binary: they are that one's
// business). The top-level keys old reports true for are known under an
// old name (Move), not unknown.
func decode(path string, v any, strict bool, old func(string) bool) (toml.MetaData, map[string]bool, error) {
	md, err := toml.DecodeFile(path, v)
	if err != nil {
		if msg, ok := wrongType(err); ok {
			return md, nil, fmt.Errorf("read config %s: %s", path, msg)
		}
		return md, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	var keys []string
	for _, k := range md.Undecoded() {
		if len(k) != 1 || !old(k[0]) {
			keys = append(keys, k.String())
		}
	}
	if strict && len(keys) > 0 {
		sort.Strings(keys)
		return md, nil, fmt.Errorf("read config %s: unknown keys: %s", path, unknownKeys(keys, settingKeys(reflect.TypeOf(v), "")))
	}
	defined := make(map[string]bool)
	for _, k := range md.Keys() {
		if len(k) != 1 || !old(k[0]) {
			defined[k.String()] = true
		}
	}
	return md, defined, nil
}
