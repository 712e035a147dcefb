package mcphttp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// Session IDs a cluster's instances all accept. Behind a balancer without
// affinity, a session's requests land on any instance; the official SDK's
// client does not initialize again on a 404, so each instance must be
// able to serve a session another one made. The ID carries what serving
// it takes (the relay session, and what the client's initialize said:
// its protocol version, capabilities and name, which the bridge consults
// to offer forms and to name the client), signed with a key every
// instance has. The token's room is not in the ID: the signature covers
// it, so an ID presented with another token fails the check as a forged
// one does. An instance that meets a valid ID it does not know adopts it
// (adopt): it initializes the session with the MCP server as the client
// did where it began.

// sessionIDLabel derives the key of session IDs from the cluster's
// shared key, so that a signature made for one purpose is never valid
// for another.
const sessionIDLabel = "agentassistant mcp session id v1"

// signedPrefix begins every signed session ID; maxSignedID bounds one
// read (what is read before the check), maxClaimsJSON what is signed.
const (
	signedPrefix  = "mcp-session-s1."
	maxSignedID   = 2048
	maxClaimsJSON = 1280
)

// deriveKey is the key for label (session IDs, event IDs, notes,
// relayed messages) derived from the shared key: each signs only its own.
func deriveKey(shared []byte, label string) []byte {
	m := hmac.New(sha256.New, shared)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// sumFields signs fields under key, each with its length (so that no
// two lists of fields sign alike).
func sumFields(key []byte, fields ...string) string {
	m := hmac.New(sha256.New, key)
	writeFields(m, fields...)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// writeFields writes each of fields to h after its length.
func writeFields(h hash.Hash, fields ...string) {
	for _, f := range fields {
		var l [8]byte
		binary.BigEndian.PutUint64(l[:], uint64(len(f)))
		h.Write(l[:])
		h.Write([]byte(f))
	}
}

// seal is payload as an ID carries it: base64, then "." and its
// signature (mac), cut to n bytes, for the room and fields.
func seal(key []byte, room [sha256.Size]byte, n int, payload []byte, fields ...string) string {
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key, room, p, fields...)[:n])
}

// mac signs payload, as seal encoded it, for the room's digest and
// fields (each with its length).
func mac(key []byte, room [sha256.Size]byte, payload string, fields ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(room[:])
	writeFields(m, fields...)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// unseal reads into v the payload of s, sealed as seal does, once its
// signature holds (bad when it does not): nothing is decoded before.
func unseal(key []byte, room [sha256.Size]byte, n int, s string, v any, bad error, fields ...string) error {
	p, sig, ok := strings.Cut(s, ".")
	if !ok {
		return bad
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key, room, p, fields...)[:n]) {
		return bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return bad
	}
	return json.NewDecoder(bytes.NewReader(payload)).Decode(v)
}

// roomHex names the room of token in a message between instances: its
// digest, never the token.
func roomHex(token string) string {
	room := sha256.Sum256([]byte(token))
	return hex.EncodeToString(room[:])
}

// signedBy reports the room of a message between instances whose
// signature mac is want, naming the room roomHex and a session ID sid
// the cluster signed in it; false for anything else.
func (h *Handler) signedBy(mac, want, room, sid string) (digest [sha256.Size]byte, ok bool) {
	if !hmac.Equal([]byte(mac), []byte(want)) {
		h.log.Warn("a message of another instance with a wrong signature ignored")
		return digest, false
	}
	d, err := hex.DecodeString(room)
	if err != nil || len(d) != len(digest) {
		return digest, false
	}
	copy(digest[:], d)
	if _, err := verifyIn(h.key, digest, sid); err != nil {
		return digest, false // no session the cluster made in that room
	}
	return digest, true
}

// claims is what a signed session ID says.
type claims struct {
	Relay        string                 `json:"s"`
	Version      string                 `json:"v,omitempty"`
	Capabilities mcp.ClientCapabilities `json:"c"`
	Client       mcp.Implementation     `json:"i"`
	Nonce        string                 `json:"n"`
}

var errBadSessionID = errors.New("not a session ID of this cluster")

// claimsOf reads what an initialize request's body declares, cut to
// what is signed: a client whose capabilities are too large to carry
// keeps the standard ones (elicitation, sampling, roots, tasks). Its
// name and version are kept as one line (as the server's services keep
// an MCP client's name), and a protocol version that is not one line is
// none the server knows, as where the client began; so the claims fit
// maxClaimsJSON, and the ID maxSignedID, whatever the client sent.
func claimsOf(relay string, body []byte) claims {
	var msg struct {
		Params mcp.InitializeParams `json:"params"`
	}
	_ = json.Unmarshal(body, &msg) // checked already; what cannot be read is left empty
	p := msg.Params
	version := p.ProtocolVersion
	if wire.OneLine(version) != version {
		version = ""
	}
	c := claims{Relay: relay, Version: cut(version, 32), Capabilities: p.Capabilities,
		Client: mcp.Implementation{Name: cut(wire.OneLine(p.ClientInfo.Name), 128), Version: cut(wire.OneLine(p.ClientInfo.Version), 64)},
		Nonce:  rand.Text()}
	if len(encodeClaims(c)) > maxClaimsJSON {
		c.Capabilities.Experimental, c.Capabilities.Extensions = nil, nil
	}
	if len(encodeClaims(c)) > maxClaimsJSON {
		k := c.Capabilities
		c.Capabilities = mcp.ClientCapabilities{Roots: k.Roots, Sampling: k.Sampling, Elicitation: k.Elicitation, Tasks: k.Tasks}
	}
	if len(encodeClaims(c)) > maxClaimsJSON {
		c.Client = mcp.Implementation{} // not reached with the cuts above; the bound holds all the same
	}
	return c
}

// encodeClaims is c as signed: JSON, without escaping what HTML would
// mind (an ID is no HTML), so that a character costs what it weighs.
func encodeClaims(c claims) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(c) // claims always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// sign makes the session ID of c in the room of token.
func sign(key []byte, token string, c claims) string {
	return signedPrefix + seal(key, sha256.Sum256([]byte(token)), sha256.Size, encodeClaims(c))
}

// verify reads a session ID signed for the room of token.
func verify(key []byte, token, sid string) (claims, error) {
	return verifyIn(key, sha256.Sum256([]byte(token)), sid)
}

// verifyIn reads a session ID signed for a room, by its digest (the
// SHA-256 of its token): what an instance told of a session names.
func verifyIn(key []byte, room [sha256.Size]byte, sid string) (claims, error) {
	var c claims
	rest, ok := strings.CutPrefix(sid, signedPrefix)
	if !ok || len(sid) > maxSignedID {
		return c, errBadSessionID
	}
	if err := unseal(key, room, sha256.Size, rest, &c, errBadSessionID); err != nil {
		if !errors.Is(err, errBadSessionID) {
			err = fmt.Errorf("read session ID: %w", err)
		}
		return c, err
	}
	return c, nil
}

// initBody is the initialize request that makes an adopted session what
// its client's initialize made it where it began.
func (c claims) initBody() []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": string(mcp.MethodInitialize),
		"params": mcp.InitializeParams{ProtocolVersion: c.Version, Capabilities: c.Capabilities, ClientInfo: c.Client}})
	return b
}
