package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestQuorumAge: how long ago a stream's leader last heard from enough
// of its replicas to make a majority with it.
func TestQuorumAge(t *testing.T) {
	s := time.Second
	never := time.Duration(math.MaxInt64)
	peer := func(active time.Duration, offline bool) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Active: active, Offline: offline}
	}
	for _, tc := range []struct {
		name     string
		replicas []*jetstream.PeerInfo
		want     time.Duration
	}{
		{"three, both heard", []*jetstream.PeerInfo{peer(s/2, false), peer(s/4, false)}, s / 4},
		{"three, one silent", []*jetstream.PeerInfo{peer(9*s, false), peer(s/4, false)}, s / 4},
		{"three, both silent", []*jetstream.PeerInfo{peer(9*s, false), peer(3*s, false)}, 3 * s},
		{"three, one offline, one silent", []*jetstream.PeerInfo{peer(0, true), peer(5*s, false)}, 5 * s},
		{"three, both offline", []*jetstream.PeerInfo{peer(0, true), peer(0, true)}, never},
		{"five, two heard", []*jetstream.PeerInfo{peer(9*s, false), peer(s, false), peer(8*s, false), peer(s/2, false)}, s},
		{"five, one heard", []*jetstream.PeerInfo{peer(9*s, false), peer(7*s, false), peer(8*s, false), peer(s/2, false)}, 7 * s},
	} {
		if got := quorumAge(tc.replicas); got != tc.want {
			t.Errorf("%s: quorumAge = %v, want %v", tc.name, got, tc.want)
		}
	}
}
