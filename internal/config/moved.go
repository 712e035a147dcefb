package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Move says that the top-level key Old now lives at New ("table.key").
// A file that still uses Old keeps working: its value is read as New's,
// and Moved reports it so the binary can say which key to write instead.
// With Unit set, Old was a whole number of Units (e.g. seconds) and New
// is a Duration ("30s").
type Move struct {
	Old, New string
	Unit     time.Duration
}

// Moved is a key a file used under its old name: the warning to log.
type Moved struct {
	Old, New string
	// Value is the value to write New with, for a count of units turned
	// into a duration; "" otherwise (the value may be a secret).
	Value string
}

// String is the warning, e.g. `ping_interval_seconds is deprecated; use
// [websocket] ping_interval = "30s"`.
func (m Moved) String() string {
	table, key, _ := strings.Cut(m.New, ".")
	s := fmt.Sprintf("%s is deprecated; use [%s] %s", m.Old, table, key)
	if m.Value != "" {
		s += " = " + m.Value
	}
	return s
}

// Rename declares the keys that moved. Call it before Load.
func (f *Flags) Rename(moves ...Move) { f.moves = append(f.moves, moves...) }

// Moved returns the old keys the file used, in the order of Rename.
func (f *Flags) Moved() []Moved { return f.moved }

// LogMoved logs one warning per old key the file used.
func (f *Flags) LogMoved(log *slog.Logger) {
	for _, m := range f.moved {
		log.Warn(m.String())
	}
}

// isOld reports whether key is the old name of a move.
func (f *Flags) isOld(key string) bool {
	return slices.ContainsFunc(f.moves, func(m Move) bool { return m.Old == key })
}

// applyMoves reads the old keys the file at path defined into v at their
// new places; defined gains the new keys. A file that gives a setting
// under both names is refused, naming both: which one was meant cannot be
// told.
func (f *Flags) applyMoves(path string, md toml.MetaData, v any, defined map[string]bool) error {
	var raw map[string]any
	for _, m := range f.moves {
		if !md.IsDefined(m.Old) {
			continue
		}
		table, key, _ := strings.Cut(m.New, ".")
		if prev := f.from[m.New]; prev != "" {
			return fmt.Errorf("read config %s: %s and %s are the same setting, [%s] %s: keep only [%s] %s", path, prev, m.Old, table, key, table, key)
		}
		if defined[m.New] {
			return fmt.Errorf("read config %s: %s and [%s] %s are the same setting: keep only [%s] %s", path, m.Old, table, key, table, key)
		}
		if raw == nil {
			if _, err := toml.DecodeFile(path, &raw); err != nil {
				return fmt.Errorf("read config %s: %w", path, err)
			}
		}
		val := raw[m.Old]
		shown := ""
		if m.Unit != 0 {
			n, ok := val.(int64)
			if !ok {
				return fmt.Errorf("read config %s: %s = %v: it must be a whole number (or write [%s] %s as a duration, e.g. \"30s\")", path, m.Old, val, table, key)
			}
			if n > math.MaxInt64/int64(m.Unit) || n < math.MinInt64/int64(m.Unit) {
				return fmt.Errorf("read config %s: %s = %d is not allowed: it must fit in 292 years", path, m.Old, n)
			}
			d := Duration(time.Duration(n) * m.Unit)
			val = d.String()
			shown = fmt.Sprintf("%q", d.String())
		}
		var b bytes.Buffer
		if err := toml.NewEncoder(&b).Encode(map[string]any{table: map[string]any{key: val}}); err != nil {
			return fmt.Errorf("read config %s: %s: %w", path, m.Old, err)
		}
		if _, err := toml.NewDecoder(&b).Decode(v); err != nil {
			// The decoder saw the value where it moved to, in a file of
			// its own: told as such, the line and the key are neither
			// the file's nor the person's.
			if t := incompatible.FindStringSubmatch(err.Error()); t != nil {
				return fmt.Errorf("read config %s: %s (it is now [%s] %s)", path, wrongTypeAt(lineOf(path, m.Old), m.Old, t[3], t[4]), table, key)
			}
			return fmt.Errorf("read config %s: %s: %w", path, m.Old, err)
		}
		defined[m.New] = true
		f.from[m.New] = m.Old
		f.moved = append(f.moved, Moved{Old: m.Old, New: m.New, Value: shown})
	}
	return nil
}

// Duration is a setting's length of time, written in the file as a
// string time.ParseDuration reads: "30s", "2m", "72h".
type Duration time.Duration

// UnmarshalText reads "30s"; a bare number (which unit?) is refused.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return durationError(string(b))
	}
	*d = Duration(v)
	return nil
}

// durationPart is one number and its unit in a duration as written.
var durationPart = regexp.MustCompile(`([0-9]*\.?[0-9]+)([^0-9.]*)`)

// durationForm is a duration written as numbers with units, known or not.
var durationForm = regexp.MustCompile(`^[-+]?([0-9]*\.?[0-9]+[^0-9.]+)+$`)

// durationError says what is wrong with s, which time.ParseDuration
// refused: a unit it does not read ("30d": there is no day), a length
// past the longest it holds, or something else (a bare number).
func durationError(s string) error {
	if durationForm.MatchString(s) {
		for _, m := range durationPart.FindAllStringSubmatch(s, -1) {
			switch m[2] {
			case "h", "m", "s", "ms", "us", "µs", "μs", "ns":
				continue
			case "d":
				return fmt.Errorf("%q has a unit Go does not read (h, m, s, ms, us, ns): there is no d; write \"%sh\" for %s days", s, dayHours(m[1]), m[1])
			}
			return fmt.Errorf("%q has a unit Go does not read (h, m, s, ms, us, ns): write it in hours, minutes or seconds, e.g. \"72h\"", s)
		}
		return fmt.Errorf("%q is longer than the longest duration, %s (about 292 years)", s, Duration(math.MaxInt64/int64(time.Hour)*int64(time.Hour)))
	}
	return fmt.Errorf("%q is no duration: write it as a string with its unit, e.g. \"30s\", \"2m\" or \"72h\"", s)
}

// dayHours is n days in hours, as written ("30" gives "720").
func dayHours(n string) string {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n + "*24"
	}
	return strconv.FormatFloat(f*24, 'f', -1, 64)
}

// MarshalText writes d as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String writes d in the largest whole unit of hours, minutes or seconds
// that holds it ("720h", "2m", "30s"), else as time.Duration does.
func (d Duration) String() string {
	v := time.Duration(d)
	switch {
	case v == 0:
		return "0s"
	case v%time.Hour == 0:
		return fmt.Sprintf("%dh", v/time.Hour)
	case v%time.Minute == 0:
		return fmt.Sprintf("%dm", v/time.Minute)
	case v%time.Second == 0:
		return fmt.Sprintf("%ds", v/time.Second)
	}
	return v.String()
}

// lineOf is the line of the file at path that sets the top-level key
// (before any table), as a number; "?" if it cannot be told.
func lineOf(path, key string) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the config file the person named, read again for a line number
	if err != nil {
		return "?"
	}
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			break
		}
		k, _, ok := strings.Cut(l, "=")
		if ok && strings.Trim(strings.TrimSpace(k), `"'`) == key {
			return strconv.Itoa(i + 1)
		}
	}
	return "?"
}
