// Package opt fills in an option left at its zero value: the one way a
// package's New gives a documented default to a duration, a count or a
// size that was not set (zero) or makes no sense (negative).
package opt

import "cmp"

// Default sets *v to def when *v is zero or less.
func Default[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
	}
}
