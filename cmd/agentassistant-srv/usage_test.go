package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFlagsDocumented: docs/configuration.md's list of the server's flags
// names every flag -h shows and no other, and -h names the commands
// (service, health) a reader meets in docs/install.md.
func TestFlagsDocumented(t *testing.T) {
	var out, usage bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	var real []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1) {
		real = append(real, m[1])
	}
	if len(real) < 10 {
		t.Fatalf("-h shows %d flags:\n%s", len(real), usage.String())
	}
	for _, cmd := range []string{"agentassistant-srv service install", "agentassistant-srv health"} {
		if !strings.Contains(usage.String(), cmd) {
			t.Errorf("-h does not name %q:\n%s", cmd, usage.String())
		}
	}

	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), srvBlockIntro)
	if !ok {
		t.Fatal("docs/configuration.md has no agentassistant-srv.toml block")
	}
	_, rest, ok = strings.Cut(rest, "\nFlags: ")
	if !ok {
		t.Fatal("docs/configuration.md lists no flags after the agentassistant-srv.toml block")
	}
	line, _, _ := strings.Cut(rest, "\n\n")
	var shown []string
	for _, m := range regexp.MustCompile("`-([a-z-]+)").FindAllStringSubmatch(line, -1) {
		shown = append(shown, m[1])
	}
	for _, f := range real {
		if !slices.Contains(shown, f) {
			t.Errorf("docs/configuration.md does not list the flag -%s", f)
		}
	}
	for _, f := range shown {
		if !slices.Contains(real, f) {
			t.Errorf("docs/configuration.md lists -%s, which is no flag of agentassistant-srv", f)
		}
	}
}

// TestMistypedCommandNamesTheCommands: a word where a command goes
// ("servce install", "status") is refused naming the commands there are,
// the closest one first, before any setting is read or anything started.
func TestMistypedCommandNamesTheCommands(t *testing.T) {
	for args, want := range map[string]string{
		"servce install": `did you mean "service"?`,
		"helth":          `did you mean "health"?`,
		"status":         `agentassistant-srv service status`,
		"version":        `did you mean -version?`,
		"port 8080":      `did you mean -port?`,
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), strings.Fields(args), &out, &errs)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "service install|uninstall|status") {
			t.Errorf("%s: %v, want it to name the commands and %q", args, err, want)
		}
	}
}
