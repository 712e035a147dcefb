package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ValidUTF8 replaces, in place, every byte sequence of m's strings (its
// messages', lists' and maps' too) that is not UTF-8 with U+FFFD, as
// strings.ToValidUTF8 does: protobuf refuses to encode such a string, and
// what surrounds the bad bytes is someone's words. Text that came in
// through protobuf is valid already; text a door read from elsewhere (an
// e-mail body) may not be.
func ValidUTF8(m proto.Message) {
	if m != nil {
		validMessage(m.ProtoReflect())
	}
}

// ValidString is s with every sequence that is not UTF-8 replaced by
// U+FFFD.
func ValidString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func validMessage(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if nv, ok := validValue(fd, l.Get(i)); ok {
					l.Set(i, nv)
				}
			}
		case fd.IsMap():
			mv := v.Map()
			var bad []protoreflect.MapKey
			mv.Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
					bad = append(bad, k)
				} else if nv, ok := validValue(fd.MapValue(), e); ok {
					mv.Set(k, nv)
				}
				return true
			})
			for _, k := range bad {
				e := mv.Get(k)
				mv.Clear(k)
				if nv, ok := validValue(fd.MapValue(), e); ok {
					e = nv
				}
				mv.Set(protoreflect.ValueOfString(ValidString(k.String())).MapKey(), e)
			}
		default:
			if nv, ok := validValue(fd, v); ok {
				m.Set(fd, nv)
			}
		}
		return true
	})
}

// validValue is v made valid, and whether it had to change; a message is
// changed in place.
func validValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s := v.String(); !utf8.ValidString(s) {
			return protoreflect.ValueOfString(ValidString(s)), true
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		validMessage(v.Message())
	}
	return v, false
}

// OneLine is s as a name shown on one line: valid UTF-8, without control
// characters (C0 and C1), line or paragraph separators, or bidirectional
// controls (U+202E would turn the rest of the line around), trimmed.
func OneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if offLine(r) {
			return -1
		}
		return r
	}, ValidString(s)))
}

// offLine: r is what OneLine leaves out.
func offLine(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Bidi_Control)
}

// oneLine reports whether s has nothing OneLine leaves out (but spaces
// around it): a label is what a person types back, so it is refused
// rather than shown as another text.
func oneLine(s string) bool {
	return !strings.ContainsFunc(s, offLine)
}
