package srv

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// bodyDeadline gives a request body d to arrive: the connection's read
// deadline is set now, when the handler starts (headers have their own,
// ReadHeaderTimeout), and lifted once the body has been read to its end,
// so that a call waiting for a person afterwards is not cut off. A body
// that trickles in is cut at the deadline, whatever its pace.
func bodyDeadline(w http.ResponseWriter, body io.ReadCloser, d time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return body // the connection offers no deadline (a test recorder)
	}
	return &deadlineBody{ReadCloser: body, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
