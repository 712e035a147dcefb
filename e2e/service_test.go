package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// serviceCmd runs agentassistant-srv service ARGS as a user whose home is
// home, in the working directory wd.
func serviceCmd(t *testing.T, home, wd string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "agentassistant-srv"), append([]string{"service"}, args...)...)
	cmd.Dir = wd
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestServiceSystemdUserUnit: service install writes a systemd user unit
// that starts the server with the flags given, from the directory it was
// given in, with the user's session; systemd-analyze verify finds nothing
// wrong with it; status and uninstall say in words what there is, and
// uninstall removes what install wrote. The machine's systemctl does the
// enabling (it needs no running manager for that).
func TestServiceSystemdUserUnit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd user units are Linux's")
	}
	for _, tool := range []string{"systemctl", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: apt-get install systemd); .ci/run installs it", tool)
		}
	}
	home, wd := t.TempDir(), t.TempDir()
	data := filepath.Join(wd, "data dir")
	unit := filepath.Join(home, ".config", "systemd", "user", "agentassistant.service")
	wants := filepath.Join(home, ".config", "systemd", "user", "default.target.wants", "agentassistant.service")

	for _, verb := range []string{"status", "uninstall"} {
		out, err := serviceCmd(t, home, wd, verb)
		if err == nil || !strings.Contains(out, "agentassistant is not registered to start with your session") {
			t.Errorf("service %s before install: %v\n%s", verb, err, out)
		}
	}
	if out, err := serviceCmd(t, home, wd, "install", "-port", "notaport"); err == nil || !strings.Contains(out, "notaport") {
		t.Errorf("install with a bad flag: %v\n%s", err, out)
	}
	if _, err := os.Stat(unit); err == nil {
		t.Fatal("a refused install left a unit behind")
	}
	if out, err := serviceCmd(t, home, wd, "bogus"); err == nil || !strings.Contains(out, `unknown service command "bogus"`) {
		t.Errorf("service bogus: %v\n%s", err, out)
	}

	out, err := serviceCmd(t, home, wd, "install", "-port", "22999", "-data", data)
	if err != nil || !strings.Contains(out, "registered to start with your session") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	// Where systemd is not the init system (a container, a chroot, WSL
	// without it), no login starts the unit: install says so rather than
	// promising the next login, and status says it is not running.
	if st, err := os.Stat("/run/systemd/system"); err != nil || !st.IsDir() {
		if !strings.Contains(out, "this machine does not run systemd") || strings.Contains(out, "next login") {
			t.Errorf("install where systemd is not the init system:\n%s", out)
		}
		if out, err := serviceCmd(t, home, wd, "status"); err != nil || !strings.Contains(out, "this machine does not run systemd") || strings.Contains(out, "not installed") {
			t.Errorf("status where systemd is not the init system: %v\n%s", err, out)
		}
	}
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	exe, _ := filepath.EvalSymlinks(filepath.Join(binDir, "agentassistant-srv"))
	for _, want := range []string{
		"ExecStart=" + exe + ` "-port" "22999" "-data" "` + data + `"`,
		"WorkingDirectory=" + wd,
		"Restart=on-failure",
		"WantedBy=default.target",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("unit lacks %q:\n%s", want, text)
		}
	}
	if _, err := os.Lstat(wants); err != nil {
		t.Errorf("the unit is not enabled for the session: %v", err)
	}
	verify := exec.Command("systemd-analyze", "verify", "--user", unit)
	verify.Env = []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	if vout, err := verify.CombinedOutput(); err != nil || len(strings.TrimSpace(string(vout))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, vout)
	}

	if out, err := serviceCmd(t, home, wd, "install"); err == nil || !strings.Contains(out, "already registered") {
		t.Errorf("second install: %v\n%s", err, out)
	}
	if out, err := serviceCmd(t, home, wd, "status"); err != nil || !strings.Contains(out, "is registered to start with your session") {
		t.Errorf("status: %v\n%s", err, out)
	}
	if out, err := serviceCmd(t, home, wd, "status", "-port", "1"); err == nil || !strings.Contains(out, "takes no flags") {
		t.Errorf("status with flags: %v\n%s", err, out)
	}
	if out, err := serviceCmd(t, home, wd, "uninstall"); err != nil || !strings.Contains(out, "no longer starts") {
		t.Errorf("uninstall: %v\n%s", err, out)
	}
	for _, p := range []string{unit, wants} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("uninstall left %s", p)
		}
	}
}

// TestServiceRunsAsTheShellDid: a session whose XDG_CONFIG_HOME is not
// ~/.config (set in a shell profile, say) keeps the generated token and
// finds its config under it; the service manager's own environment seldom
// has that variable, so the service would run on another data directory,
// with another token: the URL the person has would stop working, with no
// word why. install names the data directory and the config file it found
// as flags, so the service runs as the server did in the shell; it writes
// the unit systemd reads (enabling it, with no manager running, as
// systemctl does by itself) and readable by its owner only, as it may hold
// -token.
func TestServiceRunsAsTheShellDid(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd user units are Linux's")
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl is not installed (Debian: apt-get install systemd); .ci/run installs it")
	}
	home, wd := t.TempDir(), t.TempDir()
	xdg := filepath.Join(home, "xdg")
	app := filepath.Join(xdg, "agentassistant")
	if err := os.MkdirAll(app, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(app, "agentassistant-srv.toml")
	if err := os.WriteFile(file, []byte("agentassistant_server_port = 22998\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + xdg, "PATH=" + os.Getenv("PATH")}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "agentassistant-srv"), append([]string{"service"}, args...)...)
		cmd.Dir, cmd.Env = wd, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("install", "-token", "a-token-of-thirty-two-characters")
	if err != nil || !strings.Contains(out, "registered to start with your session") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	unit := filepath.Join(home, ".config", "systemd", "user", "agentassistant.service")
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"-data" "` + app + `"`, `"-config" "` + file + `"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("unit lacks %s:\n%s", want, raw)
		}
	}
	if st, err := os.Stat(unit); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("the unit, which holds the token, is readable by others: %v %v", st.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(unit), "default.target.wants", "agentassistant.service")); err != nil {
		t.Errorf("the unit is not enabled for the session: %v", err)
	}
	if out, err := run("uninstall"); err != nil || !strings.Contains(out, "no longer starts") {
		t.Errorf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(unit); err == nil {
		t.Error("uninstall left the unit")
	}
}
