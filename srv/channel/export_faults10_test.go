package channel

import "github.com/agentassistant/agentassistant/srv/store"

// SeqOf is the sequence ID m's ntfy notices of question id of token's
// room carry.
func SeqOf(m *Manager, token, id string) string { return m.seqOf(store.Room(token), id) }

// AskingKey is the key of the claim on sending question id of token's
// room to the channel named name (its slot's).
func AskingKey(token, id string, slot int, name string) string {
	return askingPrefix + sentNoteKey(store.Room(token), id, slot, name)
}
