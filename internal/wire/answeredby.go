package wire

import "net/url"

// AnsweredByHeader is the Connect response header of AskQuestion,
// TaskFinish and WorkReport that names the device whose answer the call
// returns (its nickname, percent-encoded: nicknames are any text, header
// values are not). Existing clients ignore it; agentassistant-mcp tells the
// agent where the person answered when it offered the question in the
// agent's client too.
const AnsweredByHeader = "Agentassistant-Answered-By"

// EncodeAnsweredBy is a nickname as an AnsweredByHeader value.
func EncodeAnsweredBy(nick string) string { return url.PathEscape(nick) }

// DecodeAnsweredBy reads an AnsweredByHeader value; a malformed one reads
// as no name.
func DecodeAnsweredBy(v string) string {
	s, err := url.PathUnescape(v)
	if err != nil {
		return ""
	}
	return s
}
