package protocount

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Codecs for connect-go (connect.WithCodec), binary and JSON: those it
// has by default, but a message's elements are counted from its bytes
// before it is decoded, and one of more than Max refused: decoded, a
// message of 5 MB made of millions of empty items would be hundreds of
// MiB of structs. A server's handler ends such a call with
// invalid_argument; a client's call ends with an error.
type (
	// Proto is the binary codec, "proto".
	Proto struct{}
	// JSON is protojson's, named As: "json", "json; charset=utf-8".
	JSON struct{ As string }
)

func (Proto) Name() string { return "proto" }

func (c Proto) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

// MarshalAppend appends m's encoding to dst: connect-go then writes a
// message into a buffer of its pool, as with its own codec.
func (Proto) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (Proto) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", m)
	}
	if err := Check(b, pm.ProtoReflect().Descriptor(), Max); err != nil {
		return err
	}
	// Fields this side does not know are dropped, as the JSON codec
	// does: what is checked is what is forwarded (an answer's contents go
	// on to every device and the agent).
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func (c JSON) Name() string { return c.As }

func (c JSON) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

// MarshalAppend appends m's JSON to dst, as Proto's does.
func (JSON) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", m)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (JSON) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", m)
	}
	if len(b) == 0 {
		return fmt.Errorf("unmarshal into %T: an empty message is no JSON object", m)
	}
	if err := CheckJSON(b, Max); err != nil {
		return err
	}
	// Unknown fields are dropped, as connect-go's own codec does: a client
	// of a newer schema still gets through.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}
