package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/kardianos/service"

	"github.com/agentassistant/agentassistant/internal/config"
)

// serviceName is the name the service manager knows the server by: the
// systemd user unit agentassistant.service, the launchd agent
// agentassistant, the Windows service agentassistant.
const serviceName = "agentassistant"

// userUnit is the systemd user unit: started with the user's session
// (default.target), restarted when it fails. The library's own template is
// for system units (multi-user.target, /etc/sysconfig).
const userUnit = `[Unit]
Description={{Description}}
Documentation=https://github.com/agentassistant/agentassistant/blob/main/docs/install.md
ConditionFileIsExecutable={{Path | cmdEscape}}
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
Type=simple
ExecStart={{Path | cmdEscape}}{{range Arguments}} {{. | cmd}}{{end}}
{{if WorkingDirectory}}WorkingDirectory={{WorkingDirectory | cmdEscape}}
{{end}}Restart=on-failure
RestartSec=5

[Install]
WantedBy=default.target
`

const serviceUsage = `usage: agentassistant-srv service install [flags]     start with your session, with these flags
       agentassistant-srv service uninstall           no longer start it
       agentassistant-srv service status              say whether it is registered and running`

// runService is "agentassistant-srv service VERB": it registers the server
// with the user's service manager (github.com/kardianos/service), so it
// starts with the user's session and keeps running after its terminal
// closes.
func runService(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("service needs a command: install, uninstall or status\n%s", serviceUsage)
	}
	verb, flags := args[0], args[1:]
	switch verb {
	case "install":
		// The flags are checked now, with the config file they name or
		// find, rather than at the next login.
		var cfg fileConfig
		fs := newFlags(&cfg, stderr)
		if err := fs.Parse(flags); err != nil {
			return err
		}
		file, err := fs.Load(&cfg)
		if err != nil {
			return err
		}
		if err := checkSettings(fs, &cfg); err != nil {
			return err
		}
		flags = pinned(fs, flags, file, cfg.Server.DataDir)
	case "uninstall", "status":
		if len(flags) > 0 {
			return fmt.Errorf("service %s takes no flags (%s)\n%s", verb, strings.Join(flags, " "), serviceUsage)
		}
	default:
		return fmt.Errorf("unknown service command %q\n%s", verb, serviceUsage)
	}
	svc, err := newService(flags)
	if err != nil {
		return err
	}
	where := unitFile()
	if runtime.GOOS == "linux" && where != "" {
		// systemctl, enabling the unit by itself where no manager runs,
		// looks for it under XDG_CONFIG_HOME; the library writes it
		// under ~/.config, where a manager started without that variable
		// (the usual session, where a shell profile sets it) looks too.
		if err := os.Setenv("XDG_CONFIG_HOME", filepath.Dir(filepath.Dir(filepath.Dir(where)))); err != nil {
			return fmt.Errorf("set XDG_CONFIG_HOME for systemctl: %w", err)
		}
	}
	installed := func() bool {
		if where == "" { // Windows: the service manager knows
			_, err := svc.Status()
			return !errors.Is(err, service.ErrNotInstalled)
		}
		_, err := os.Stat(where)
		return err == nil
	}
	enabled := func() bool {
		if runtime.GOOS != "linux" {
			return true
		}
		_, err := os.Lstat(filepath.Join(filepath.Dir(where), "default.target.wants", serviceName+".service"))
		return err == nil
	}
	what := serviceName
	if where != "" {
		what += " (" + where + ")"
	}
	switch verb {
	case "install":
		if installed() {
			return fmt.Errorf("%s is already registered to start with your session: run 'agentassistant-srv service uninstall' first to change how it starts", what)
		}
		if err := svc.Install(); err != nil {
			// The unit is written and enabled before the manager is
			// asked to reload: a session without a running systemd
			// user manager (ssh, a container) still starts it at the
			// next login.
			if !installed() || !enabled() {
				if where != "" {
					_ = os.Remove(where) // all or nothing
				}
				if runtime.GOOS == "linux" {
					// The library keeps systemctl's words to itself:
					// name the command, which says them when run.
					return fmt.Errorf("register %s with systemd: systemctl --user enable %s.service failed: %w", serviceName, serviceName, err)
				}
				return fmt.Errorf("register %s with %s: %w", serviceName, service.ChosenSystem(), err)
			}
		}
		if where != "" {
			// The unit holds the flags, -token among them when given.
			if err := os.Chmod(where, 0o600); err != nil {
				return fmt.Errorf("keep %s private: %w", where, err)
			}
		}
		if !systemdRuns() {
			_, err := fmt.Fprintf(stdout, "%s is registered to start with your session, but %s: it starts only once systemd runs your session; until then, start agentassistant-srv yourself.\n", what, noSystemd)
			return err
		}
		if err := svc.Start(); err != nil {
			_, err = fmt.Fprintf(stdout, "%s is registered to start with your session; it could not be started now (%v): it starts at your next login.\n", what, err)
			return err
		}
		_, err := fmt.Fprintf(stdout, "%s is registered to start with your session, and started.\n", what)
		return err
	case "uninstall":
		if !installed() {
			return fmt.Errorf("%s is not registered to start with your session: there is nothing to uninstall", serviceName)
		}
		_ = svc.Stop() // it may not be running
		// As with install, a manager that is not running cannot reload:
		// what counts is that the unit is gone.
		if err := svc.Uninstall(); err != nil && installed() {
			return fmt.Errorf("unregister %s: %w", serviceName, err)
		}
		_, err := fmt.Fprintf(stdout, "%s no longer starts with your session; its data directory is kept.\n", what)
		return err
	default: // status
		if !installed() {
			return fmt.Errorf("%s is not registered to start with your session: 'agentassistant-srv service install' registers it", serviceName)
		}
		if !systemdRuns() {
			_, err := fmt.Fprintf(stdout, "%s is registered to start with your session, and is not running as a service: %s.\n", what, noSystemd)
			return err
		}
		st, err := svc.Status()
		if err != nil {
			_, err = fmt.Fprintf(stdout, "%s is registered to start with your session; whether it runs now, the service manager did not say (%v).\n", what, err)
			return err
		}
		state := "not running"
		if st == service.StatusRunning {
			state = "running"
		}
		_, err = fmt.Fprintf(stdout, "%s is registered to start with your session, and is %s.\n", what, state)
		return err
	}
}

// newService is the server as the user's service manager runs it: this
// executable with flags, from the working directory of now (so relative
// paths and ./agentassistant-srv.toml mean what they meant).
func newService(flags []string) (service.Service, error) {
	if runtime.GOOS == "linux" {
		// A systemd user unit whatever the init system looks like from
		// here: the session's manager is systemd --user.
		for _, s := range service.AvailableSystems() {
			if s.String() == "linux-systemd" {
				service.ChooseSystem(userSystemd{s})
			}
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	cfg := &service.Config{
		Name:             serviceName,
		DisplayName:      "agentassistant",
		Description:      "agentassistant-srv: agents' questions to your browser and phone",
		Executable:       exe,
		Arguments:        flags,
		WorkingDirectory: wd,
		Option: service.KeyValue{
			"UserService":   runtime.GOOS != "windows", // Windows has no per-user services
			"SystemdScript": userUnit,
			"RunAtLoad":     true, // launchd: start at login, not only on demand
			"KeepAlive":     true,
			"StartType":     "automatic",
		},
	}
	if home, err := os.UserHomeDir(); err == nil && runtime.GOOS == "darwin" {
		// launchd's output files: where macOS keeps a user's logs,
		// rather than the home directory itself.
		cfg.Option["LogDirectory"] = filepath.Join(home, "Library", "Logs")
	}
	return service.New(nil, cfg)
}

// pinned is the flags install registers: those given, and, unless
// given, the data directory and the config file the server finds now
// under the user config directory. Both depend on XDG_CONFIG_HOME on
// Linux, which a shell profile may set and the service manager not see:
// the service would generate another token in another directory, and the
// URL the person has would stop working.
func pinned(fs *config.Flags, flags []string, file, dataDir string) []string {
	out := slices.Clip(flags)
	if !fs.Given("data") && dataDir == config.AppDir() {
		if abs, err := filepath.Abs(dataDir); err == nil {
			out = append(out, "-data", abs)
		}
	}
	if !fs.Given("config") && file != "" && file != configName {
		if abs, err := filepath.Abs(file); err == nil {
			out = append(out, "-config", abs)
		}
	}
	return out
}

// unitFile is the file that registers the service, "" where the service
// manager keeps it itself (Windows).
func unitFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	switch runtime.GOOS {
	case "linux":
		return filepath.Join(home, ".config", "systemd", "user", serviceName+".service")
	case "darwin":
		return filepath.Join(home, "Library", "LaunchAgents", serviceName+".plist")
	}
	return ""
}

// noSystemd says why a systemd user unit does not run here.
const noSystemd = "this machine does not run systemd now (no /run/systemd/system: a container, a chroot, WSL without systemd)"

// systemdRuns tells whether a systemd user unit can run here: on Linux,
// whether systemd is the init system (sd_booted(3)'s test), without which
// no user manager starts, at a login or ever. Elsewhere it is not asked.
func systemdRuns() bool {
	if runtime.GOOS != "linux" {
		return true
	}
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// userSystemd is the library's systemd, taken as present: its detection
// looks for systemd as the machine's init, which a user session's
// manager does not need.
type userSystemd struct{ service.System }

func (userSystemd) Detect() bool { return true }
