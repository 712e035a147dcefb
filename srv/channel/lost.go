package channel

import (
	"maps"
	"slices"
	"strings"
)

// StorageLost says, once the cluster's NATS has lost its storage (its
// buckets gone), what the channels lost with it that this instance
// knows of: the edits owed it was trying. Their notes went with the
// buckets, and so did the notes that name their messages, so no
// instance can make them any more: those messages keep their buttons,
// and a tap on one is told it answers nothing. Logged per channel with
// the questions' IDs, never a token.
func (m *Manager) StorageLost() {
	o := &m.owed
	o.mu.Lock()
	lost := map[string][]string{}
	for _, it := range o.items {
		lost[it.c.Name()] = append(lost[it.c.Name()], it.n.Request.ID)
	}
	o.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(lost)) {
		ids := lost[name]
		slices.Sort(ids)
		m.log.Error("edits owed lost with the cluster's storage: their messages keep their buttons, and a tap on one is told it answers nothing",
			"channel", name, "lost_edits", len(ids), "ids", strings.Join(ids, ","))
	}
}
