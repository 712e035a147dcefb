package wsconn

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestCloseLeavesNoTrimBehind: a crowd's departure schedules memory to be
// given back a second later; a set closed before then owns that timer
// and stops it, so nothing of the set runs after Close returns.
func TestCloseLeavesNoTrimBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trims atomic.Int32
		was := freeOSMemory
		freeOSMemory = func() { trims.Add(1) }
		defer func() { freeOSMemory = was }()

		var s Set
		conns := make([]*Conn, trimPeak)
		for i := range conns {
			conns[i] = &Conn{o: Options{PingInterval: time.Minute}}
			if !s.Add(conns[i]) {
				t.Fatal("the set refused a connection")
			}
		}
		for _, c := range conns {
			s.Remove(c) // half the crowd gone, a trim is scheduled
		}
		s.Close()
		closed := trims.Load()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := trims.Load(); got != closed {
			t.Fatalf("memory was trimmed %d times after Close returned", got-closed)
		}
	})
}
