package cluster

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/natstest"
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

// TestNATSAsyncErrorsLogged: what nats.go reports on its own (a watch's
// consumer gone while NATS was away, a slow consumer) goes to the
// server's log, not as a bare line on stderr.
func TestNATSAsyncErrorsLogged(t *testing.T) {
	ns := natstest.Start(t)
	var buf syncBuffer
	c, err := Open(t.Context(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a",
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.nc.ErrorHandler()(c.nc, nil, nats.ErrConsumerNotActive)
	if got := buf.String(); !strings.Contains(got, "consumer not active") || !strings.Contains(got, "level=WARN") {
		t.Fatalf("log: %q", got)
	}
}
