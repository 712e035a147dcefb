package main

import (
	"bytes"
	"fmt"
	"strings"
)

var rule = strings.Repeat("=", 78)

// render writes the notices as plain text: an index, then each
// component's files, unchanged. The same components give the same
// bytes, so the archives stay reproducible.
func render(notices []notice) []byte {
	var b bytes.Buffer
	b.WriteString(`THIRD-PARTY NOTICES

The agentassistant binaries (agentassistant-srv, agentassistant-mcp,
agentassistant-input) are built with the Go toolchain and link the Go
modules below; agentassistant-srv embeds a web UI whose scripts and
service worker bundle the npm packages below. Each is listed with its
version and the licence and notice files it is distributed with, as
its licence asks of whoever ships it. These are the terms of those
components, not of agentassistant itself.

`)
	for _, kind := range []struct{ kind, heading string }{
		{kindGo, "The Go toolchain (its runtime and standard library are in every binary):"},
		{kindModule, "Go modules linked into the binaries:"},
		{kindNPM, "npm packages bundled into the web UI and its service worker:"},
	} {
		first := true
		for _, n := range notices {
			if n.kind != kind.kind {
				continue
			}
			if first {
				fmt.Fprintf(&b, "%s\n", kind.heading)
				first = false
			}
			fmt.Fprintf(&b, "  %s %s\n", n.name, n.version)
		}
		if !first {
			b.WriteString("\n")
		}
	}
	for _, n := range notices {
		fmt.Fprintf(&b, "%s\n%s %s (%s)\n%s\n", rule, n.name, n.version, n.kind, rule)
		for _, f := range n.files {
			fmt.Fprintf(&b, "\n--- %s ---\n\n", f.name)
			b.WriteString(strings.TrimRight(strings.ReplaceAll(f.text, "\r\n", "\n"), "\n \t"))
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}
