package rpc

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentassistant/agentassistant/internal/protocount"
)

// The codecs of the Connect services, binary and JSON: those connect-go
// has by default, but a message's elements are counted from its bytes
// before it is decoded, and one of more than protocount.Max refused
// (invalid_argument): decoded, a message of 5 MB made of millions of
// empty items would be hundreds of MiB of structs.
type (
	countedProto struct{}
	countedJSON  struct{ name string }
)

func (countedProto) Name() string { return "proto" }

func (countedProto) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", m)
	}
	return proto.Marshal(pm)
}

func (countedProto) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", m)
	}
	if err := protocount.Check(b, pm.ProtoReflect().Descriptor(), protocount.Max); err != nil {
		return err
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func (c countedJSON) Name() string { return c.name }

func (countedJSON) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", m)
	}
	return protojson.Marshal(pm)
}

func (countedJSON) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", m)
	}
	if len(b) == 0 {
		return fmt.Errorf("unmarshal into %T: an empty message is no JSON object", m)
	}
	if err := protocount.CheckJSON(b, protocount.Max); err != nil {
		return err
	}
	// Unknown fields are dropped, as connect-go's own codec does: a client
	// of a newer schema still gets through.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}
