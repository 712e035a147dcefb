package strictjson_test

import (
	"fmt"

	"github.com/agentassistant/agentassistant/internal/strictjson"
)

// A door checks JSON from the wire before it reads or forwards it: a key
// given twice, even escaped, has no one meaning and is refused.
func ExampleCheck() {
	for _, text := range []string{
		`{"uiSpec":{"v":1}}`,
		`{"uiSpec":{"backendData":"SECRET"},"uiSpec":{"v":1}}`,
		`{"a":1,"\u0061":2}`,
		`[1e999999]`,
	} {
		fmt.Println(strictjson.Check([]byte(text)) == nil)
	}
	// Output:
	// true
	// false
	// false
	// false
}
