package channel

import "github.com/agentassistant/agentassistant/srv/store"

// SeqOf is the sequence ID m's ntfy notices of question id of token's
// room carry.
func SeqOf(m *Manager, token, id string) string { return m.seqOf(store.Room(token), id) }
