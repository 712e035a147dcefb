package hub

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestQuietRoomLetsGo: what a room keeps for a while (the outcomes for
// re-attaching callers, Retention; its events for devices that come
// back, the replay window; the records behind them) was let go only as
// the next request settled. A server whose traffic stopped kept the last
// of it, answers' images included, for good. Now it goes once its time
// is over, with no new request.
func TestQuietRoomLetsGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{Retention: 10 * time.Minute})
		defer h.Close()
		image := strings.Repeat("A", 64<<10)
		for i := range 20 {
			id := "q" + strconv.Itoa(i)
			rc, ec := ask(h, "tok", id, time.Hour, context.Background())
			synctest.Wait()
			rep := Reply{ClientID: "pc", Contents: []*pb.McpResultContent{{Type: 2, Image: &pb.ImageContent{Type: "image", Data: image, MimeType: "image/png"}}}}
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, rep); err != nil {
				t.Fatal(err)
			}
			<-rc
			<-ec
		}
		time.Sleep(20 * time.Minute) // past Retention and the replay window
		synctest.Wait()
		r := h.room("tok")
		r.mu.Lock()
		settled, events := len(r.settled), r.events.len()
		r.mu.Unlock()
		h.local.mu.Lock()
		recs := len(h.local.recs)
		h.local.mu.Unlock()
		if settled != 0 || events != 0 || recs != 0 {
			t.Errorf("a room quiet for 20 minutes keeps %d outcomes, %d events and %d records; want none", settled, events, recs)
		}
	})
}

// TestClosedHubArmsNoSweep: a closed hub's room is swept no more, though
// it keeps something (an answer for an absent agent, for a day).
func TestClosedHubArmsNoSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		rc, ec := ask(h, "tok", "q", time.Hour, context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{ClientID: "pc"}); err != nil {
			t.Fatal(err)
		}
		<-rc
		<-ec
		h.Close()
		time.Sleep(2 * sweepEvery)
		synctest.Wait()
		r := h.room("tok")
		r.mu.Lock()
		armed := r.sweeper != nil
		r.mu.Unlock()
		if armed {
			t.Error("a closed hub's room is still swept")
		}
	})
}
