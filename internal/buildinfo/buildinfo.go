// Package buildinfo says which build a binary is, for -version and the
// version reported to MCP clients.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version, commit and date are set by a release build (and by make build
// from git), with the linker's -X flag:
//
//	-X github.com/agentassistant/agentassistant/internal/buildinfo.version=v1.2.3
//	-X github.com/agentassistant/agentassistant/internal/buildinfo.commit=0123abcd
//	-X github.com/agentassistant/agentassistant/internal/buildinfo.date=2026-01-02T03:04:05Z
//
// They win over what the Go toolchain recorded, which a build from an
// archive of the source, or with -buildvcs=false, does not have.
var version, commit, date string

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
// revision and its time (stamped at link time, else as the build recorded
// them: builds from a clone do), and the Go version.
func String(name string) string {
	parts := []string{name, Version()}
	bi, ok := debug.ReadBuildInfo()
	rev, at := commit, date
	if ok && rev == "" {
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				if at == "" {
					at = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && modified {
			rev += "+modified"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		parts = append(parts, rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	if ok {
		parts = append(parts, bi.GoVersion)
	}
	return strings.Join(parts, " ")
}
