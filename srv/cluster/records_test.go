package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestUpdateAtRevisionZeroMakesNothing: Update writes over the revision
// it is given, as the local records do (hub.Shared): at revision 0 a
// record there changed since (hub.ErrRecordChanged, which the hub's
// compare-and-set reads again), a record deleted (a cleared history,
// one past its age) is not made again, nor one never made.
func TestUpdateAtRevisionZeroMakesNothing(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	ctx := context.Background()
	rec := hub.SharedRecord{Record: store.Record{Room: "room", ID: "q1", Kind: int(wire.AskQuestion), Text: "q", Status: store.Pending}}
	if _, err := a.c.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Update(ctx, rec, 0); !errors.Is(err, hub.ErrRecordChanged) {
		t.Fatalf("Update at revision 0 of a record there: %v, want hub.ErrRecordChanged", err)
	}
	if err := a.c.reqs.Delete(ctx, key(rec.Room, rec.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Update(ctx, rec, 0); !errors.Is(err, hub.ErrRecordChanged) {
		t.Fatalf("Update at revision 0 of a deleted record: %v, want hub.ErrRecordChanged", err)
	}
	if _, _, err := a.c.Get(ctx, rec.Room, rec.ID); !errors.Is(err, hub.ErrRecordMissing) {
		t.Fatalf("the deleted record after Update at revision 0: %v, want hub.ErrRecordMissing", err)
	}
	rec.ID = "never-asked"
	if _, err := a.c.Update(ctx, rec, 0); !errors.Is(err, hub.ErrRecordChanged) {
		t.Fatalf("Update at revision 0 of no record: %v, want hub.ErrRecordChanged", err)
	}
	if _, _, err := a.c.Get(ctx, rec.Room, rec.ID); !errors.Is(err, hub.ErrRecordMissing) {
		t.Fatalf("no record after Update at revision 0: %v, want hub.ErrRecordMissing", err)
	}
}
