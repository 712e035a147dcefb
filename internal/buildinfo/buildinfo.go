// Package buildinfo says which build a binary is, for -version and the
// version reported to MCP clients.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set by a release build:
// -ldflags "-X github.com/agentassistant/agentassistant/internal/buildinfo.version=v1.2.3".
var version string

// Version is the release version set at link time, else the module version
// go install recorded, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// String is the version line of -version: the version, then the source
// revision and its time when the build recorded them (builds from a
// clone do), and the Go version.
func String(name string) string {
	parts := []string{name, Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if modified {
				rev += "+modified"
			}
			parts = append(parts, rev)
		}
		if at != "" {
			parts = append(parts, at)
		}
		parts = append(parts, bi.GoVersion)
	}
	return strings.Join(parts, " ")
}
