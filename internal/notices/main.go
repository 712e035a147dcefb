// Command notices writes THIRD_PARTY_NOTICES.txt: the licence and notice
// files of every Go module linked into the release binaries and of every
// npm package bundled into the web UI, as their licences ask of whoever
// ships them. The Go modules are those `go list -deps` finds for each
// main and target .goreleaser.yaml builds; the npm packages are those
// the UI build recorded from its module graph (web/plugins/bundled.ts).
// A component without a licence file fails the run by name: a gap in
// the notices is never silent.
//
// `make notices` runs it after `make web`, from the repository's root;
// it writes the file there, for the archives, and into the UI build,
// where agentassistant-srv serves it at /notices.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
)

// FileName is what the archives carry and the server serves.
const FileName = "THIRD_PARTY_NOTICES.txt"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "notices:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("notices", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the repository's root")
	out := fs.String("out", FileName, "the file to write, relative to -root")
	ui := fs.String("ui", "srv/webui/dist", "the UI build, relative to -root: its .bundled lists are read and a copy is written there")
	web := fs.String("web", "web", "the UI's sources, relative to -root: its node_modules holds the packages the lists name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	goPkgs, err := goComponents(ctx, *root)
	if err != nil {
		return err
	}
	npmPkgs, err := npmComponents(filepath.Join(*root, *ui), filepath.Join(*root, *web))
	if err != nil {
		return err
	}
	notices, err := collect(append(goPkgs, npmPkgs...))
	if err != nil {
		return err
	}
	text := render(notices)
	for _, p := range []string{filepath.Join(*root, *out), filepath.Join(*root, *ui, FileName)} {
		// Readable by all: it goes into the archives and the UI build.
		if err := os.WriteFile(p, text, 0o644); err != nil { // #nosec G306 -- public text
			return fmt.Errorf("write notices: %w", err)
		}
	}
	log.Info("notices written", "file", *out, "go", len(goPkgs), "npm", len(npmPkgs), "bytes", len(text))
	return nil
}
