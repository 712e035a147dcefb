package cluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// A request's key in the bucket: its room (a digest of the token, never
// the token) and its ID, which the agent chose, in base64url: any bytes
// make a valid key.
func key(room, id string) string {
	return "r." + room + "." + b64(id)
}

// maxKey bounds a request's key: NATS closes for good a connection that
// sends a subject past its control line (4 KB), and a key is in the
// subject of every read and write. The doors' IDs are far shorter; an
// answer or a cancel may name any.
const maxKey = 1024

// keyed is the key of a request id may have: none for an ID empty or too
// long for NATS.
func keyed(room, id string) (string, bool) {
	k := key(room, id)
	return k, id != "" && len(k) <= maxKey
}

// b64 is s as a key's or a subject's token (base64url): any name, ID or
// session is valid there. unb64 reads it back.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func unb64(s string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err == nil
}

// splitKey is the room and the ID of a request's key.
func splitKey(k string) (room, id string, ok bool) {
	rest, ok := strings.CutPrefix(k, "r.")
	if !ok {
		return "", "", false
	}
	room, enc, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	id, ok = unb64(enc)
	return room, id, ok
}

// A record's value is its JSON: the store's record and the cluster's
// fields (hub.SharedRecord). A reply's contents, images included, are in
// it, so NATS's max_payload bounds the largest answer a cluster takes.
func encode(rec hub.SharedRecord) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode request record: %w", err)
	}
	return b, nil
}

func decode(b []byte) (hub.SharedRecord, error) {
	var rec hub.SharedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("decode request record: %w", err)
	}
	return rec, nil
}

// decodeAt is the record b read at key k. Its value must name the request
// of its key: one written under a key and naming another (another ID,
// none, another room) was written by no instance, and, settled under the
// key its value names, could never be answered nor end.
func decodeAt(k string, b []byte) (hub.SharedRecord, error) {
	rec, err := decode(b)
	if err != nil {
		return rec, err
	}
	if at, ok := keyed(rec.Room, rec.ID); !ok || at != k {
		return hub.SharedRecord{}, fmt.Errorf("decode request record: its value names another request than its key (an ID of %d bytes)", len(rec.ID))
	}
	return rec, nil
}
