// Package opt fills in an option left at its zero value: the one way a
// package's New gives a documented default to a duration, a count or a
// size that was not set (zero) or makes no sense (negative), a logger
// or a clock that was not given.
package opt

import (
	"cmp"
	"log/slog"
	"time"
)

// Default sets *v to def when *v is zero or less.
func Default[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
	}
}

// Logger sets *l to a logger that discards, when it is nil.
func Logger(l **slog.Logger) {
	if *l == nil {
		*l = slog.New(slog.DiscardHandler)
	}
}

// Clock sets *now to time.Now, when it is nil.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}
