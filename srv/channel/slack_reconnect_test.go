package channel

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// failedOpens are the times of the calls of apps.connections.open
// answered with an error so far.
func failedOpens(api *slacktest.API) []time.Time {
	var out []time.Time
	_ = api.WaitFor(context.Background(), func(cs []slacktest.Call) bool {
		for _, c := range cs {
			if c.Method == "apps.connections.open" && c.Form["_error"] != "" {
				out = append(out, c.At)
			}
		}
		return true
	})
	return out
}

// awaitFailedOpens waits until n calls of apps.connections.open failed.
func awaitFailedOpens(t *testing.T, api *slacktest.API, n int) []time.Time {
	t.Helper()
	err := api.WaitFor(t.Context(), func(cs []slacktest.Call) bool {
		k := 0
		for _, c := range cs {
			if c.Method == "apps.connections.open" && c.Form["_error"] != "" {
				k++
			}
		}
		return k >= n
	})
	if err != nil {
		t.Fatalf("wait for %d failed connects: %v", n, err)
	}
	return failedOpens(api)
}

// TestSlackRefreshReconnectsAtOnce: Slack's routine refresh of the
// Socket Mode connection (a disconnect message, refresh_requested) is
// followed by the next connection at once, not after a wait.
func TestSlackRefreshReconnectsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, _, _ := pipeSlack(t, nil)
		synctest.Wait()
		start := time.Now()
		for n, reason := range []string{"refresh_requested", "warning", "refresh_requested"} {
			if err := api.Disconnect(reason); err != nil {
				t.Fatal(err)
			}
			if err := api.Dialled(t.Context(), n+2); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the connections came %v after the first refresh, want at once", waited)
		}
	})
}

// TestSlackReconnectWaitStartsAgain: the wait between tries to connect
// grows while they fail, and starts again from its first value once a
// connection was good (Slack greeted it): a failure after a day's good
// connection is tried again within a second, not after the longest wait
// of the failures before it.
func TestSlackReconnectWaitStartsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, _, _ := pipeSlack(t, nil)
		synctest.Wait()
		api.Down(http.StatusNotFound)
		if err := api.Disconnect("refresh_requested"); err != nil {
			t.Fatal(err)
		}
		awaitFailedOpens(t, api, 6)
		api.Down(0)
		if err := api.Dialled(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // greeted
		time.Sleep(24 * time.Hour)

		api.Down(http.StatusNotFound)
		if err := api.Disconnect("refresh_requested"); err != nil {
			t.Fatal(err)
		}
		at := awaitFailedOpens(t, api, 8)
		if gap := at[7].Sub(at[6]); gap > time.Second {
			t.Fatalf("after a good connection, a failed connect was tried again after %v, want at most 1s", gap)
		}
	})
}

// TestSlackReconnectWaitBounded: while Slack is out of reach for hours,
// the tries to connect stay at most slackMaxWait apart, so that the
// connection is back within that long of Slack's return.
func TestSlackReconnectWaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, _, _ := pipeSlack(t, nil)
		synctest.Wait()
		api.Down(http.StatusServiceUnavailable)
		if err := api.Disconnect("refresh_requested"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Hour)
		api.Down(0)
		back := time.Now()
		if err := api.Dialled(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(back); waited > slackMaxWait {
			t.Fatalf("connected %v after Slack was back, want within %v", waited, slackMaxWait)
		}
		at := failedOpens(api)
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap > slackMaxWait {
				t.Fatalf("tries %d and %d to connect were %v apart, want at most %v", i, i+1, gap, slackMaxWait)
			}
		}
	})
}

// TestSlackReconnectWaitsAsAsked: a try to connect that Slack rate
// limits is tried again no sooner than Slack asked (Retry-After).
func TestSlackReconnectWaitsAsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, _, _ := pipeSlack(t, nil)
		synctest.Wait()
		api.Down(http.StatusTooManyRequests)
		if err := api.Disconnect("refresh_requested"); err != nil {
			t.Fatal(err)
		}
		at := awaitFailedOpens(t, api, 3)
		for i := 1; i < len(at); i++ {
			if gap, asked := at[i].Sub(at[i-1]), slacktest.RetryAfter*time.Second; gap < asked {
				t.Fatalf("tries %d and %d to connect were %v apart, want at least %v", i, i+1, gap, asked)
			}
		}
	})
}
