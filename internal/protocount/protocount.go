// Package protocount bounds what a protobuf message costs to decode,
// read from its bytes before it is decoded.
//
// Decoding allocates for each element what its bytes do not show: an
// empty message in a repeated field is two bytes on the wire and a
// struct of some eighty bytes once decoded, an empty string two bytes
// and a header of sixteen. A frame of 10 MB made of five million empty
// elements decodes into some 590 MiB. Check counts the elements (every
// field, every item of a repeated field, at every depth) in one pass
// that allocates nothing, so a door refuses such a message for the cost
// of reading it.
package protocount

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Max is the elements the server's doors take in one message: far more
// than any of their clients sends (an answer of a thousand images is
// some five thousand), and at most some ten MiB of structs decoded.
const Max = 100_000

// TooManyError is a message of more elements than the bound.
type TooManyError struct{ Max int }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("a message of more than %d fields and items", e.Max)
}

// Check returns a *TooManyError when b, the encoding of a message of
// type md, holds more than max elements. Bytes that are not a valid
// encoding are left for the decoder to refuse: Check stops at them.
func Check(b []byte, md protoreflect.MessageDescriptor, max int) error {
	left := max
	if !walk(b, md, &left, 0) {
		return &TooManyError{Max: max}
	}
	return nil
}

// maxDepth is how deep walk follows nested messages; deeper ones are
// counted as one element each, and the decoder's own recursion limit
// refuses them.
const maxDepth = 100

// walk takes b's elements from left and reports false once more are
// found than left held.
func walk(b []byte, md protoreflect.MessageDescriptor, left *int, depth int) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		if *left--; *left < 0 {
			return false
		}
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(num)
		}
		if typ == protowire.BytesType && fd != nil {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return true
			}
			b = b[n:]
			switch {
			case fd.Message() != nil && depth < maxDepth:
				if !walk(v, fd.Message(), left, depth+1) {
					return false
				}
			case fd.IsList():
				if *left -= packed(v, fd.Kind()); *left < 0 {
					return false
				}
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return true
		}
		b = b[n:]
	}
	return true
}

// packed is how many items a packed repeated field of kind k holds in v.
func packed(v []byte, k protoreflect.Kind) int {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return len(v) / 4
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return len(v) / 8
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return 0 // not packed: each item has its own tag
	}
	n := 0 // varints: one ends at each byte without its high bit
	for _, c := range v {
		if c < 0x80 {
			n++
		}
	}
	return n
}

// CheckJSON is Check for the JSON form of a message (protojson): it
// counts the objects, the arrays and the commas outside strings, which
// are at least the elements less one per object and array, and returns
// a *TooManyError past max. An empty object in an array is three bytes
// of JSON and a struct once decoded.
func CheckJSON(b []byte, max int) error {
	n, in, escaped := 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case in:
			switch c {
			case '\\':
				escaped = true
			case '"':
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[' || c == ',':
			if n++; n > max {
				return &TooManyError{Max: max}
			}
		}
	}
	return nil
}
