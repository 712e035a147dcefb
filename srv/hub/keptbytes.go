package hub

// What a room keeps after a request settled is bounded by bytes, not
// only by count and age. An answer may carry 16 MiB of images, so the
// counts alone (maxMissed answers for absent agents, maxSettled outcomes
// for re-attaching callers) let one token's busy or hostile holder make
// the server keep gigabytes (a record's bytes are store.Record.Bytes:
// the room's decoded copy is about as large; both count the same, so a
// room and the records behind it forget the same ones). Past a room's budget the oldest go first,
// never the newest, as past the counts; each is logged once, by its
// request ID. The local records (local.go) forget theirs by the same
// bytes, so what goes from a room is gone from memory: an agent that
// comes back for it is told what it is told once it expired. A cluster's
// records are in NATS, not here; each instance's rooms keep within the
// same bounds what they hear.

// The budgets a room's kept answers and outcomes have unless the
// options say (Options.MissedBytes, Options.RetentionBytes): enough for
// dozens of screenshots, little for a laptop.
const (
	defaultMissedBytes    = 64 << 20
	defaultRetentionBytes = 32 << 20
)

// overWhat names, for the log, the bound a room's kept answers or
// outcomes went over: their count, else their bytes.
func overWhat(count bool) string {
	if count {
		return "count"
	}
	return "bytes"
}
