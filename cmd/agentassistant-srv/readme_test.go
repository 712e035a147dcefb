package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// tomlKeys returns the keys of fileConfig's TOML tags; a table's as
// "table.key".
func tomlKeys(v any) []string {
	return tableKeys(reflect.TypeOf(v), "")
}

func tableKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		k, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if k == "" || k == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			keys = append(keys, tableKeys(ft, prefix+k+".")...)
			continue
		}
		keys = append(keys, prefix+k)
	}
	return keys
}

// readmeBlock returns the keys set (`key = ...`, commented out or not) in
// the first TOML block of README.md after the line intro.
func readmeBlock(t *testing.T, readme, intro string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n"+intro+"\n")
	if !ok {
		t.Fatalf("README.md has no line %q", intro)
	}
	_, rest, ok = strings.Cut(rest, "```toml\n")
	if !ok {
		t.Fatalf("README.md has no TOML block after %q", intro)
	}
	block, _, _ := strings.Cut(rest, "```")
	var keys []string
	table := ""
	header := regexp.MustCompile(`^#?\s*\[([a-z0-9_.]+)\]`)
	key := regexp.MustCompile(`^#?\s*([a-z0-9_]+)\s*=`)
	for line := range strings.Lines(block) {
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1] + "."
		} else if m := key.FindStringSubmatch(line); m != nil {
			keys = append(keys, table+m[1])
		}
	}
	return keys
}

// srvBlockIntro is the line of docs/configuration.md before its
// agentassistant-srv.toml.
const srvBlockIntro = "`agentassistant-srv.toml` (every setting at its default; durations are"

// oldKeysSection is the part of docs/configuration.md that names the flat
// keys of earlier versions, up to the end of their table: the one place
// they may be quoted.
func oldKeysSection(t *testing.T, text string) (section, rest string) {
	t.Helper()
	before, after, ok := strings.Cut(text, "### Files from earlier versions\n")
	if !ok {
		t.Fatal("docs/configuration.md has no section on files from earlier versions")
	}
	// The section ends with its table: what follows it, up to the next
	// heading or not, is current text again.
	intro, table, ok := strings.Cut(after, "\n| old key")
	if !ok {
		t.Fatal("docs/configuration.md's section on earlier versions has no table of old keys")
	}
	table, tail, _ := strings.Cut(table, "\n\n")
	return intro + "\n| old key" + table, before + "\n" + tail
}

// TestOldKeysDocumented: docs/configuration.md's table of old keys names
// each of them with its new place, as the server reads them.
func TestOldKeysDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _ := oldKeysSection(t, string(b))
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\| `\\[([a-z]+)\\] ([a-z0-9_]+)`")
	shown := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		shown[m[1]] = m[2] + "." + m[3]
	}
	for _, m := range moves {
		if shown[m.Old] != m.New {
			t.Errorf("the table shows %s as %q, the server reads it as %s", m.Old, shown[m.Old], m.New)
		}
		delete(shown, m.Old)
	}
	for old := range shown {
		t.Errorf("the table shows %s, which the server does not read", old)
	}
}

// TestREADMENamesTheRealSettings: the example agentassistant-srv.toml in
// docs/configuration.md sets every key the server reads and no other, and
// every setting-like name the documentation quotes (`max_...`,
// `..._seconds`, `[relay] call_timeout`, `cluster.nats_url`, ...) is a key
// of the server or of agentassistant-mcp, under its current name: a reader
// who copies one gets a setting, not "unknown key" or a warning at start.
// Only the table of old keys names the old ones.
func TestREADMENamesTheRealSettings(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	real := tomlKeys(fileConfig{})
	shown := readmeBlock(t, readme, srvBlockIntro)
	for _, k := range shown {
		if !slices.Contains(real, k) {
			t.Errorf("README's agentassistant-srv.toml sets %s, which is no setting of the server", k)
		}
	}
	for _, k := range real {
		if !slices.Contains(shown, k) {
			t.Errorf("README's agentassistant-srv.toml does not show %s", k)
		}
	}

	known := slices.Clone(real)
	tables := map[string]bool{}
	for _, k := range real { // a key may be quoted without its table
		if table, key, ok := strings.Cut(k, "."); ok && !strings.HasPrefix(k, "channels.") {
			known = append(known, key)
			tables[table] = true
		}
	}
	known = append(known, readmeBlock(t, readme, "`agentassistant-mcp.toml` (an example is in this repository):")...)
	front, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, readme = oldKeysSection(t, readme)
	docs := map[string]string{"README.md": string(front), "configuration.md": readme}
	more, _ := filepath.Glob("../../docs/*.md")
	more = append(more, "../../SECURITY.md")
	for _, p := range more {
		if filepath.Base(p) == "configuration.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(p)] = string(b)
	}
	// Names that look like settings and are something else: NATS's own
	// setting (max_payload, max_file_store), the cluster's JetStream buckets, an Ingress error code,
	// the figures of /metrics, a field of seed 003's /health.
	notOurs := []string{"max_payload", "max_file_store", "orchestrator_error", "agentassistant_instances", "agentassistant_presence", "agentassistant_relay_hosts", "agentassistant_requests", "agentassistant_push", "agentassistant_claims", "agentassistant_channel_notes", "agentassistant_channel_leases", "agentassistant_mcp_notes",
		"agentassistant_requests_total", "agentassistant_answer_seconds", "agentassistant_store_write_seconds", "agentassistant_connections",
		"agentassistant_preauth_refused_total", "agentassistant_preauth_evicted_total", "agentassistant_nats_ok", "uptime_seconds"}
	settingLike := regexp.MustCompile(`^(max_|agui_|ingress_|orchestrator_|nats_|agentassistant_|allowed_|tls_|db_|study_|history_|missed_|orphan_|login_|ping_|pong_|write_|body_|booking_|relay_session|unauthenticated_|inbox_|mcp_|idle_|replay_|frontend_)|(_seconds|_hours|_days|_bytes|_fsync|_per_token|_per_address|_timeout|_grace|_wait|_interval|_window)$`)
	quoted := regexp.MustCompile("`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")
	inTable := regexp.MustCompile("`\\[([a-z]+)\\] ([a-z][a-z0-9_]*)")
	for name, text := range docs {
		for _, m := range quoted.FindAllStringSubmatch(text, -1) {
			k := m[1]
			if settingLike.MatchString(k) && !slices.Contains(known, k) && !slices.Contains(notOurs, k) {
				t.Errorf("%s quotes `%s`, which is no setting (of agentassistant-srv.toml or agentassistant-mcp.toml)", name, k)
			}
		}
		for _, m := range inTable.FindAllStringSubmatch(text, -1) {
			table := m[1]
			if tables[table] && !slices.Contains(real, table+"."+m[2]) {
				t.Errorf("%s quotes %s, which is no setting of [%s]", name, m[0], table)
			}
		}
	}
}

// docTOMLBlocks returns the ```toml blocks of the documentation (a list
// item's indented ones too) that are agentassistant-srv.toml or part of
// it, by file and line: all but the agentassistant-mcp.toml example.
func docTOMLBlocks(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	blocks := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var block strings.Builder
		indent, start, before := "", 0, ""
		for i, line := range strings.Split(string(b), "\n") {
			trimmed := strings.TrimLeft(line, " ")
			switch {
			case start == 0 && trimmed == "```toml":
				indent, start = line[:len(line)-len(trimmed)], i+1
				block.Reset()
			case start != 0 && trimmed == "```":
				if !strings.Contains(before, "agentassistant-mcp.toml") {
					blocks[fmt.Sprintf("%s:%d", filepath.Base(f), start)] = block.String()
				}
				start = 0
			case start != 0:
				block.WriteString(strings.TrimPrefix(line, indent) + "\n")
			default:
				if strings.TrimSpace(line) != "" {
					before = line
				}
			}
		}
	}
	return blocks
}

// TestDocTOMLSnippetsStart: every agentassistant-srv.toml snippet of the
// documentation, pasted into a config file as it is, with only its
// placeholders (…) filled in as a reader would, starts the server: each
// key is one the server reads, under its table, with a value of the type
// it takes and one it accepts.
func TestDocTOMLSnippetsStart(t *testing.T) {
	blocks := docTOMLBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("found %d TOML blocks in the documentation", len(blocks))
	}
	port := regexp.MustCompile(`(?m)^agentassistant_server_port = \d+`)
	for where, block := range blocks {
		t.Run(where, func(t *testing.T) {
			body := strings.ReplaceAll(block, "…", "filled-in-by-the-reader-0123456789")
			body = port.ReplaceAllString(body, "agentassistant_server_port = 0")
			if _, _, err := loadConfig(t, body); err != nil {
				t.Fatalf("the server does not read it: %v\n%s", err, block)
			}
			if stdout, _, err := start(t, body); err != nil || !strings.Contains(stdout, "is running") {
				t.Fatalf("the server does not start with it: %v\n%s", err, block)
			}
		})
	}
}

// TestDocNATSCommandsStart: every nats-server command line of the
// documentation is one nats-server accepts, as its own flag parser and
// checks read it (a JetStream cluster's server needs a name, for one).
func TestDocNATSCommandsStart(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "nats-server ") {
				continue
			}
			n++
			args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(strings.Split(line, " #")[0]), "&"))[1:]
			fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			none := func() {}
			opts, err := natsserver.ConfigureOptions(fs, args, none, none, none)
			if err == nil {
				opts.StoreDir = t.TempDir() // not the guide's /var/lib/nats
				_, err = natsserver.NewServer(opts)
			}
			if err != nil {
				t.Errorf("%s: nats-server refuses %q: %v", filepath.Base(f), line, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no nats-server command found in the documentation")
	}
}

// usageFlags returns the flags a usage text lists ("  -name ...").
func usageFlags(usage string) map[string]bool {
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`).FindAllStringSubmatch(usage, -1) {
		flags[m[1]] = true
	}
	return flags
}

// docCommands returns, for every command line of the documentation that
// runs program (in a code block or a code span), the words after it.
func docCommands(t *testing.T, program string) map[string][][]string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	cmd := regexp.MustCompile(`(?:^|[\s` + "`" + `(/"])` + regexp.QuoteMeta(program) + `((?:[ \t]+[^\s` + "`" + `#|;&)]+)*)`)
	out := map[string][][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cmd.FindAllStringSubmatch(string(b), -1) {
			out[filepath.Base(f)] = append(out[filepath.Base(f)], strings.Fields(m[1]))
		}
	}
	return out
}

// TestDocFlagsExist: every flag the documentation gives agentassistant-srv
// (and its health and service commands) is one it takes: a reader who
// copies a command gets the server, not "flag provided but not defined".
func TestDocFlagsExist(t *testing.T) {
	usage := func(args ...string) map[string]bool {
		var out, errs bytes.Buffer
		_ = run(context.Background(), append(args, "-h"), &out, &errs)
		f := usageFlags(out.String() + errs.String())
		if len(f) == 0 {
			t.Fatalf("agentassistant-srv %v -h lists no flags", args)
		}
		return f
	}
	server, health := usage(), usage("health")
	n := 0
	for file, cmds := range docCommands(t, "agentassistant-srv") {
		for _, words := range cmds {
			known := server
			if len(words) > 0 && words[0] == "health" {
				known = health
			}
			for _, w := range words {
				if !regexp.MustCompile(`^-[a-z][a-z0-9-]*$`).MatchString(w) {
					continue
				}
				n++
				if !known[w] {
					t.Errorf("%s: agentassistant-srv %s: no such flag %s", file, strings.Join(words, " "), w)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d flags of agentassistant-srv in the documentation", n)
	}
}
