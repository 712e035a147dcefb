package protocount_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentassistant/agentassistant/internal/protocount"
)

// TestCheck: every field and every item counts, at any depth, packed
// items too; a message of max elements passes and one more is refused;
// bytes that are no message are left to the decoder.
func TestCheck(t *testing.T) {
	list := func(n int) proto.Message {
		l := &structpb.ListValue{}
		for range n {
			l.Values = append(l.Values, &structpb.Value{}) // one element each
		}
		return l
	}
	nested := &structpb.ListValue{Values: []*structpb.Value{ // 1 + 1 + 3
		structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{{}, {}, {}}}),
	}}
	packed := &descriptorpb.SourceCodeInfo_Location{Path: []int32{1, 2, 300, 4}} // 1 + 4
	for _, tc := range []struct {
		name string
		m    proto.Message
		max  int
		ok   bool
	}{
		{"empty", &structpb.ListValue{}, 0, true},
		{"at the bound", list(10), 10, true},
		{"one past it", list(11), 10, false},
		{"nested, at the bound", nested, 5, true},
		{"nested, past it", nested, 4, false},
		{"packed, at the bound", packed, 5, true},
		{"packed, past it", packed, 4, false},
	} {
		b, err := proto.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		err = protocount.Check(b, tc.m.ProtoReflect().Descriptor(), tc.max)
		var too *protocount.TooManyError
		if tc.ok != (err == nil) || err != nil && (!errors.As(err, &too) || too.Max != tc.max) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, junk := range [][]byte{{0xff}, {0x0a, 0x05, 0x01}, {0x0a}} {
		if err := protocount.Check(junk, (&structpb.ListValue{}).ProtoReflect().Descriptor(), 10); err != nil {
			t.Errorf("%x: %v", junk, err)
		}
	}
}

// TestCheckJSON: objects, arrays and commas count; those inside strings,
// escaped quotes included, do not.
func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		fits bool
	}{
		{`{}`, 1, true},
		{`{"a":[{},{},{}]}`, 7, true},
		{`{"a":[{},{},{}]}`, 6, false},
		{`["","",""]`, 3, true},
		{`["","",""]`, 2, false},
		{`{"a":"{[,,,]}"}`, 1, true},
		{`{"a":"\"{[,,,]}"}`, 1, true},
		{`{"a":"\\","b":[]}`, 3, true},
		{`{"a":"\\","b":[]}`, 2, false},
	} {
		err := protocount.CheckJSON([]byte(tc.in), tc.max)
		if tc.fits != (err == nil) {
			t.Errorf("%s with %d: %v", tc.in, tc.max, err)
		}
	}
}
