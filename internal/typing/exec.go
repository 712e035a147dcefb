package typing

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// run runs a backend's program and turns a failure into an error that
// carries what the program said.
func run(ctx context.Context, path string, args ...string) error {
	// #nosec G204 -- path is the backend found on PATH; the text goes as
	// one argument, never through a shell.
	cmd := exec.CommandContext(ctx, path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if msg != "" {
			return fmt.Errorf("run %s: %w: %s", path, err, msg)
		}
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil
}

// repeated returns n copies of args, flattened.
func repeated(n int, args ...string) []string {
	out := make([]string, 0, n*len(args))
	for range n {
		out = append(out, args...)
	}
	return out
}

// inBatches calls f with at most size copies of a key at a time, so a long
// run of Backspaces neither makes one huge command line nor stops being
// cancellable.
func inBatches(ctx context.Context, n, size int, f func(k int) error) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(n, size)
		if err := f(k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
