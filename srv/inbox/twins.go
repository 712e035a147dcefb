package inbox

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// A task report and its answer go out twice, under each generation's Cmd
// (bothGenerations), and a note keeps its frames for the replay ring:
// marshalled apart, an answer's image would be held twice. The twins
// share one buffer instead, Cmd A, the rest, Cmd B: the first frame is
// Cmd A and the rest, as proto.Marshal writes it (field 1 first), the
// second the rest and Cmd B. A field's place does not change a protobuf
// message (every decoder reads fields in any order), and a frame is never
// written to once made.

// cmdField is WebsocketMessage's Cmd, field 1.
const cmdField protowire.Number = 1

// marshalTwins returns the frames of a and b as one buffer, when b is a
// under another Cmd; ok false when it is not, or a does not marshal as
// it is (marshal's path then replaces what is not UTF-8).
func marshalTwins(a, b *pb.WebsocketMessage) (fa, fb []byte, ok bool) {
	if a.Cmd == b.Cmd || a.Cmd == "" || b.Cmd == "" {
		return nil, nil, false
	}
	// a and b are Messages' own, made for this encoding: shared with
	// nothing at their top level, so their Cmd may change for a moment.
	cmdA, cmdB := a.Cmd, b.Cmd
	a.Cmd, b.Cmd = "", ""
	defer func() { a.Cmd, b.Cmd = cmdA, cmdB }()
	if !proto.Equal(a, b) {
		return nil, nil, false
	}
	head := protowire.AppendString(protowire.AppendTag(nil, cmdField, protowire.BytesType), cmdA)
	tail := protowire.AppendString(protowire.AppendTag(nil, cmdField, protowire.BytesType), cmdB)
	o := proto.MarshalOptions{UseCachedSize: true}
	buf := make([]byte, 0, len(head)+o.Size(a)+len(tail))
	buf = append(buf, head...)
	buf, err := o.MarshalAppend(buf, a)
	if err != nil {
		return nil, nil, false
	}
	rest := len(buf)
	buf = append(buf, tail...)
	return buf[:rest:rest], buf[len(head):], true
}
