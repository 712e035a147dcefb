package answercap_test

import (
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
)

// A notification's button answers one question once, through a
// capability made for it and that device; the token never travels.
func ExampleStore() {
	caps := answercap.New()
	now := time.Now()
	name := caps.Make("the-token", answercap.Cap{Room: "room-1", Kind: wire.AskQuestion, ID: "q-1",
		Who: "Pixel 8 · Chrome", WhoID: "sub-1", Door: "push", Expires: now.Add(time.Hour)}, now)
	c, ok := caps.Take(name, now)
	fmt.Println(ok, c.ID, c.Who)
	_, again := caps.Take(name, now)
	fmt.Println(again)
	// Output:
	// true q-1 Pixel 8 · Chrome
	// false
}
