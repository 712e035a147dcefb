//go:build !unix

package hub

import (
	"testing"
	"time"
)

// cpuTime is 0 where getrusage is not: the benchmark's cpu-ns/op reads 0.
func cpuTime(*testing.B) time.Duration { return 0 }
