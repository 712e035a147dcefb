//go:build !unix

package wsconn

import "errors"

// inlineWrites: elsewhere every frame goes through the writer goroutine.
const inlineWrites = false

func sockWrite(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }
