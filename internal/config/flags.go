package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Flags is a binary's command line over its config file: a setting's
// value is its default, then the file's, then the flag's when the flag was
// given (even with the default value). Declare each setting with
// StringSetting or IntSetting on the field of the config struct that holds
// its default, other flags on the FlagSet as usual; then Parse, then Load.
type Flags struct {
	*flag.FlagSet
	file    string  // the config file's name, e.g. agentassistant-srv.toml
	path    *string // -config
	version *bool   // -version
	partial bool
	apply   map[string]func() // by flag name: copies the flag's value into the config
	keys    map[string]bool   // the keys the config file defined, moved ones by their new name
	moves   []Move            // the keys that have a new name (Rename)
	moved   []Moved           // the old names the file used
	from    map[string]string // by new key: the old one the file wrote it as
}

// NewFlags returns the flags of program, whose config file is named file;
// usage and errors go to w. It declares -config and -version. With partial, the file
// may hold keys the binary does not read (it shares another's file).
func NewFlags(program, file string, partial bool, w io.Writer) *Flags {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(w)
	f := &Flags{FlagSet: fs, file: file, partial: partial, apply: make(map[string]func()), from: make(map[string]string)}
	f.path = fs.String("config", "", "config file (default: ./"+file+", then "+file+" in the user config directory)")
	f.version = fs.Bool("version", false, "print the version and exit")
	return f
}

// ParseVersion parses args; given -version, it writes the version line
// to w instead and reports done.
func (f *Flags) ParseVersion(args []string, w io.Writer, line string) (done bool, err error) {
	if err := f.Parse(args); err != nil || !*f.version {
		return false, err
	}
	_, err = fmt.Fprintln(w, line)
	return true, err
}

// StringSetting declares a flag that sets *p; its default is *p now.
func (f *Flags) StringSetting(p *string, name, usage string) {
	v := f.String(name, *p, usage)
	f.apply[name] = func() { *p = *v }
}

// IntSetting declares a flag that sets *p; its default is *p now.
func (f *Flags) IntSetting(p *int, name, usage string) {
	v := f.Int(name, *p, usage)
	f.apply[name] = func() { *p = *v }
}

// Given reports whether the flag name was on the command line.
func (f *Flags) Given(name string) bool {
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// Load reads the config file into cfg, the struct whose fields the flags
// were declared on, the old names of Rename at their new places, then
// sets the fields of the flags given (a flag wins over either name). It returns
// the file read, "" when there was none. Call it after Parse.
func (f *Flags) Load(cfg any) (path string, err error) {
	if f.NArg() > 0 {
		// Parsing stops at the first word that is not a flag: the flags
		// after it would be ignored without a word.
		if f.Lookup(f.Arg(0)) != nil { // "version", as other tools take it
			return "", fmt.Errorf("unexpected argument %q: did you mean -%s? Every setting is a flag (-name value), and nothing follows them", f.Arg(0), f.Arg(0))
		}
		return "", fmt.Errorf("unexpected argument %q: every setting is a flag (-name value), and nothing follows them", f.Arg(0))
	}
	path, err = Find(*f.path, f.file)
	if err != nil {
		return "", err
	}
	if path != "" {
		md, keys, err := decode(path, cfg, !f.partial, f.isOld)
		if err != nil {
			return "", err
		}
		if err := f.applyMoves(path, md, cfg, keys); err != nil {
			return "", err
		}
		f.keys = keys
	}
	f.Visit(func(fl *flag.Flag) {
		if set := f.apply[fl.Name]; set != nil {
			set()
		}
	})
	return path, nil
}

// Logger is the text logger of a binary at level ("debug", "info", "warn"
// or "error"), writing to w.
func Logger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Main runs a binary's run, its context ended by an interrupt or SIGTERM,
// and exits as a command does: 2 after -h or a bad flag (flag.ErrHelp),
// 1 after another error, which it prints after program's name.
func Main(program string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, program+":", err)
	os.Exit(1)
}

// Terminal reports whether f, a binary's stdin or stdout, is a terminal
// (a character device).
func Terminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
