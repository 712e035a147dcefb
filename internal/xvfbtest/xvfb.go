// Package xvfbtest gives tests a real X11 display (Xvfb) with an xterm
// that writes whatever is typed into it to a file (`cat > FILE`), so a
// test can type through the real keyboard path and read back exactly what
// arrived. Tests skip, saying what to install, when Xvfb, xterm or xdotool
// is missing.
package xvfbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Display is a running Xvfb.
type Display struct {
	Name string // ":N", for DISPLAY
}

// Env returns os.Environ with DISPLAY set to d and a UTF-8 locale.
func (d *Display) Env() []string {
	env := []string{"DISPLAY=" + d.Name, "LC_ALL=C.UTF-8", "LANG=C.UTF-8"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DISPLAY", "WAYLAND_DISPLAY", "LC_ALL", "LANG":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Need skips t unless the programs are on PATH.
func Need(t testing.TB, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (Debian/Ubuntu: apt install xvfb xterm xdotool); skipping the X11 typing test", p)
		}
	}
}

// Start runs Xvfb on a free display until the test ends.
func Start(t testing.TB) *Display {
	t.Helper()
	Need(t, "Xvfb", "xterm", "xdotool")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// -displayfd: Xvfb picks a free display and writes its number to fd 3
	// once it accepts clients.
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1024x640x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	log := &lockedWriter{b: &strings.Builder{}}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close() // Xvfb holds its copy
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	num := make(chan string, 1)
	go func() {
		defer func() { _ = r.Close() }()
		line, _ := bufio.NewReader(r).ReadString('\n')
		num <- strings.TrimSpace(line)
	}()
	select {
	case n := <-num:
		if n == "" {
			t.Fatalf("Xvfb did not start:\n%s", log.String())
		}
		return &Display{Name: ":" + n}
	case <-time.After(20 * time.Second):
		t.Fatalf("Xvfb gave no display number within 20s:\n%s", log.String())
	}
	return nil
}

// Xterm is an xterm on the display running `cat > File`, with the
// keyboard focus.
type Xterm struct {
	d    *Display
	File string
	cmd  *exec.Cmd
	done chan struct{} // closed once the xterm has exited
}

// StartXterm opens the xterm and gives it the focus.
func (d *Display) StartXterm(t testing.TB) *Xterm {
	t.Helper()
	file := filepath.Join(t.TempDir(), "typed.txt")
	title := fmt.Sprintf("aa-typing-test-%d", time.Now().UnixNano())
	// #nosec G204 -- fixed programs; file is the test's own temporary file
	cmd := exec.Command("xterm", "-u8", "-geometry", "80x12+0+0", "-title", title,
		"-e", "sh", "-c", `exec cat > "$0"`, file)
	cmd.Env = d.Env()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	x := &Xterm{d: d, File: file, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // cat's end is the xterm's; the file says what arrived
		close(x.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-x.done
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := d.xdotool(ctx, "search", "--sync", "--onlyvisible", "--name", title)
	if err != nil {
		t.Fatalf("xterm window did not appear: %v", err)
	}
	win := strings.Fields(out)[0]
	if _, err := d.xdotool(ctx, "windowfocus", "--sync", win); err != nil {
		t.Fatalf("focus the xterm: %v", err)
	}
	// The file exists once the shell has run cat, so the terminal is
	// ready for input.
	for {
		if _, err := os.Stat(file); err == nil {
			return x
		}
		select {
		case <-ctx.Done():
			t.Fatal("cat did not start in the xterm")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Signal sends sig to the xterm: SIGSTOP and SIGCONT make a window that
// lags behind the keys it is sent.
func (x *Xterm) Signal(sig os.Signal) error { return x.cmd.Process.Signal(sig) }

// Close ends the input (Ctrl-D twice: the first hands a line without a
// newline to cat, the second is end of file), waits for the xterm to
// exit and returns what cat wrote.
func (x *Xterm) Close(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := x.d.xdotool(ctx, "key", "ctrl+d"); err != nil {
		t.Fatal(err)
	}
	for {
		// Once cat has exited the xterm closes; until then, more Ctrl-D.
		select {
		case <-x.done:
			b, err := os.ReadFile(x.File)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		case <-time.After(200 * time.Millisecond):
			_, _ = x.d.xdotool(ctx, "key", "ctrl+d")
		case <-ctx.Done():
			t.Fatal("the xterm did not exit after Ctrl-D")
		}
	}
}

func (d *Display) xdotool(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "xdotool", args...) // #nosec G204 -- the tests' own arguments
	cmd.Env = d.Env()
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return "", fmt.Errorf("xdotool %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("xdotool %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
