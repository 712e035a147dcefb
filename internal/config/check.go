package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Check collects the settings whose values cannot work, so a binary
// refuses them at start, before it creates or announces anything, instead
// of replacing them with defaults or failing later. Each problem is one
// line naming the key (and its flag), the value, and what is allowed. A
// rule applies to a setting given in the file or by its flag; one left
// out keeps its default.
type Check struct {
	f    *Flags
	errs []error
}

// Check returns an empty Check of the settings Load read. Call it after
// Load.
func (f *Flags) Check() *Check { return &Check{f: f} }

// Set reports whether key was in the config file or given by flag (the
// flag's name; "" when the setting has none).
func (c *Check) Set(key, flag string) bool {
	return c.f.keys[key] || (flag != "" && c.f.Given(flag))
}

// Bad records that key's value is not allowed; allowed says what is.
func (c *Check) Bad(key, flag string, value any, allowed string) {
	name := key
	if old := c.f.from[key]; old != "" {
		name += " (written as " + old + ")"
	}
	if flag != "" {
		name += " (-" + flag + ")"
	}
	if s, ok := value.(string); ok {
		value = strconv.Quote(s)
	}
	c.errs = append(c.errs, fmt.Errorf("setting %s = %v is not allowed: %s", name, value, allowed))
}

// Int refuses a value of key, when set, outside lo..hi; allowed says what
// is allowed, or is built from lo and hi when empty.
func (c *Check) Int(key, flag string, v, lo, hi int64, allowed string) {
	if !c.Set(key, flag) || (v >= lo && v <= hi) {
		return
	}
	if allowed == "" {
		allowed = fmt.Sprintf("it must be from %d to %d", lo, hi)
		if hi == math.MaxInt64 {
			allowed = fmt.Sprintf("it must be %d or more", lo)
		}
	}
	c.Bad(key, flag, v, allowed)
}

// Count refuses a count or size of key, when set, below lo (up to the
// largest int64).
func (c *Check) Count(key, flag string, v, lo int64) {
	c.Int(key, flag, v, lo, math.MaxInt64, "")
}

// Positive refuses a duration of key, when set, that is not positive.
func (c *Check) Positive(key, flag string, v time.Duration) {
	if c.Set(key, flag) && v <= 0 {
		c.Bad(key, flag, Duration(v).String(), "it must be more than 0s")
	}
}

// Needs refuses key, when set, while the setting it depends on (dep, the
// key it needs) is empty.
//
// A key set to its default (or left empty) asks for nothing and is
// accepted: a file that spells every setting out, as docs/configuration.md's does,
// starts.
func (c *Check) Needs(key, flag string, v any, isDefault bool, depKey string, depSet bool) {
	if c.Set(key, flag) && !isDefault && !depSet {
		c.Bad(key, flag, v, "it applies only with "+depKey+" set, which is empty")
	}
}

// Err is every problem found, one a line; nil when there is none.
func (c *Check) Err() error { return errors.Join(c.errs...) }

// HostName reports whether s is a bare host name or IP address, as a Host
// header names it without its port: no scheme, port, path or brackets.
func HostName(s string) bool {
	if s == "" {
		return false
	}
	if strings.Contains(s, ":") {
		return net.ParseIP(s) != nil // only IPv6 has colons
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for _, r := range label {
			if !isLabelRune(r) {
				return false
			}
		}
	}
	return true
}

// Origin checks that s is a browser origin as browsers send it:
// scheme://host[:port], nothing after it, the port only when not the
// scheme's default.
func Origin(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.User != nil || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#") {
		return errors.New("it must be an origin, scheme://host[:port] with nothing after it (e.g. \"http://localhost:5173\")")
	}
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		if net.ParseIP(host) == nil {
			return errors.New("its host must be a host name or an IP address")
		}
	} else if !HostName(host) {
		return errors.New("its host must be a host name or an IP address")
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("its port must be from 1 to 65535")
		}
		if (u.Scheme == "http" && n == 80) || (u.Scheme == "https" && n == 443) {
			return fmt.Errorf("browsers send it without the default port %d", n)
		}
	}
	return nil
}

// Level refuses a log level of key (flag) that Logger does not know.
func (c *Check) Level(key, flag, level string) {
	if _, err := Logger(level, io.Discard); err != nil {
		c.Bad(key, flag, level, "it must be debug, info, warn or error")
	}
}

// ServerAddress refuses a client's agentassistant_server_host (-host) and
// agentassistant_server_port (-port) that cannot name agentassistant-srv.
func (c *Check) ServerAddress(host string, port int) {
	if host != "" && !HostName(host) {
		c.Bad("agentassistant_server_host", "host", host, "it must be a host name or an IP address, without scheme, port or path (e.g. \"127.0.0.1\")")
	}
	c.Int("agentassistant_server_port", "port", int64(port), 1, 65535, "")
}

// isLabelRune: a letter, digit, '-' or '_' of a host name's label.
func isLabelRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
