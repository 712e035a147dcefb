package wire_test

import (
	"fmt"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// A nickname is any text; the header that carries who answered takes it
// percent-encoded, and a malformed value reads as no name.
func ExampleEncodeAnsweredBy() {
	v := wire.EncodeAnsweredBy("Zoë's phone / 2")
	fmt.Println(v)
	fmt.Println(wire.DecodeAnsweredBy(v))
	fmt.Printf("%q\n", wire.DecodeAnsweredBy("%zz"))
	// Output:
	// Zo%C3%AB%27s%20phone%20%2F%202
	// Zoë's phone / 2
	// ""
}
