package lru_test

import (
	"fmt"

	"github.com/agentassistant/agentassistant/internal/lru"
)

// A token's sessions, bounded: the one unused the longest makes room, but
// only among those its owner may let go (here: none in a call).
func ExampleMap() {
	type session struct{ inCall bool }
	var m lru.Map[string, *session]
	m.Put("a", &session{inCall: true})
	m.Put("b", &session{})
	m.Put("c", &session{})
	m.Use("b") // b was just used: c is now the idle one unused longest
	k, _, ok := m.Oldest(func(s *session) bool { return !s.inCall })
	fmt.Println(k, ok)
	// Output: c true
}
