package channel

import "net/http"

// noRedirects is the CheckRedirect of every post to a receiver (ntfy, a
// webhook): a receiver takes the notice or refuses it, and has no
// business sending it on. Followed, a redirect would have the server
// ask what the receiver names and the server alone reaches (a loopback
// service, a cloud's metadata address; by GET after a 302, with the
// body after a 307) and take the notice, and its signature, there. The
// redirect is the send's answer: a failure, logged with its status.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
