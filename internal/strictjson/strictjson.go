// Package strictjson checks JSON from the wire before anything reads it,
// so that what a door checks and what it forwards are one document.
//
// encoding/json keeps the last of a key given twice, a JavaScript peer
// too, while a check that scans the bytes or reads the first one sees
// another value: {"uiSpec":{"backendData":1},"uiSpec":{}} reads as a
// uiSpec without backendData, and its bytes, forwarded as written, still
// carry it. Such a text has no one meaning, so it is refused, as are a
// number no float64 holds (1e999999 reads as Inf, or not at all), a
// number literal of megabytes, and a text of more values than any
// message holds (MaxValues). Keys are compared as decoded:
// "a" and "\u0061" are one key.
//
// The check runs on untrusted input, before or at authentication: it
// reads with encoding/json's tokenizer (Decoder.Token; encoding/json/v2's
// jsontext still needs GOEXPERIMENT=jsonv2), its time and memory grow
// linearly with the size of the text, which the caller bounds (a frame,
// a body), and with its values, bounded by MaxValues; nesting is bounded
// by MaxDepth. A text costs about what decoding it once into an any
// costs (BenchmarkCheck: an array of one-digit numbers is the worst per
// byte).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

const (
	// MaxDepth bounds the nesting of objects and arrays.
	MaxDepth = 512
	// MaxNumberLen bounds a number literal, in bytes: a float64 needs at
	// most 24 to be written exactly enough to read back.
	MaxNumberLen = 128
	// MaxValues bounds the values of a text: its objects, arrays,
	// strings, numbers and literals, at every depth (a key is not one).
	// Each costs far more read and decoded than its text: a zero in an
	// array is two bytes, and some hundred bytes once the tokenizer has
	// read it and a decoder made it an element of an []any; an empty
	// object is three bytes and a struct of some hundred in a slice that
	// doubles as it grows. A body of 16 MiB of zeros costs 960 MiB to
	// read token by token. The bound lets a door refuse it for a small
	// part of that; it is far more than any message of the doors'
	// clients holds.
	MaxValues = 200_000
)

// Kind says what is wrong with a text.
type Kind int

const (
	Syntax    Kind = iota + 1 // not one JSON value
	Depth                     // nested deeper than MaxDepth
	Duplicate                 // an object gives a key twice
	Number                    // a number no float64 holds, or longer than MaxNumberLen
	Size                      // more than MaxValues values
)

// Error is what Check found, where.
type Error struct {
	Kind Kind
	// Path is where, from the root: $, $.uiSpec, $.a[0]["b c"].
	Path string
	// Detail says what, in words a sender can act on.
	Detail string
}

func (e *Error) Error() string {
	if e.Path == "" || e.Path == "$" {
		return e.Detail
	}
	return e.Detail + " at " + e.Path
}

// Check reports whether b is exactly one JSON value (whitespace around it
// aside) whose objects give each key once, whose numbers a float64 holds,
// whose nesting is at most MaxDepth and whose values are at most
// MaxValues; the error is an *Error.
func Check(b []byte) error {
	c := checker{d: json.NewDecoder(bytes.NewReader(b))}
	c.d.UseNumber()
	return c.run()
}

// Unmarshal decodes b, checked as Check does, into v, a pointer to a Go
// value with JSON field tags, as encoding/json does. encoding/json
// matches a key to a field without regard to case, the last one
// winning, so here keys are also compared that way: {"text":"yes",
// "Text":"no"} gives a key twice, and is refused. So is a member that
// names no field of v, a value of the wrong type, and anything after the
// value. Keys are folded at every depth: it is for bodies of structs, not
// of maps, whose keys are data ({"A":1,"a":2} would be refused).
func Unmarshal(b []byte, v any) error {
	c := checker{d: json.NewDecoder(bytes.NewReader(b)), fold: true}
	c.d.UseNumber()
	if err := c.run(); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("decode JSON: %w", err)
	}
	return nil
}

// fold is a key as encoding/json matches it to a field: each letter the
// least of those Unicode folds together with it (K, k and the Kelvin
// sign are one; so are S, s and ſ).
func fold(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// Member is a member of the object checked, as written.
type Member struct {
	// Name is the key, decoded ("m\u0065thod" is "method").
	Name string
	// Value is the value's text: a slice of the text checked.
	Value []byte
}

// Members checks b as Check does and, in the same pass, returns the
// members of b when it is an object, in order, so that a caller reads
// them without decoding b again. A key given twice or a number no
// float64 holds does not end the pass: the error is the first such one,
// and the members are all there (a caller may still read, say, the id
// of a request it refuses). A text that is no JSON, nested deeper than
// MaxDepth, or of more than MaxValues values, ends it: the members are those read until then.
func Members(b []byte) ([]Member, error) {
	c := checker{d: json.NewDecoder(bytes.NewReader(b)), text: b, collect: true}
	c.d.UseNumber()
	err := c.run()
	if err == nil && c.first != nil {
		err = c.first
	}
	return c.members, err
}

// level is an open object or array.
type level struct {
	object bool
	// key is the object's member being read ("" before the first);
	// index the array's element.
	key   string
	index int
	// wantKey: the object's next token is a key (or its end).
	wantKey bool
	// keys seen: a few in a slice, then a set.
	few  []string
	many map[string]struct{}
}

// seen records k and reports whether it was already there.
func (l *level) seen(k string) bool {
	if l.many != nil {
		if _, ok := l.many[k]; ok {
			return true
		}
		l.many[k] = struct{}{}
		return false
	}
	if slices.Contains(l.few, k) {
		return true
	}
	if len(l.few) < 8 {
		l.few = append(l.few, k)
		return false
	}
	l.many = make(map[string]struct{}, 16)
	for _, f := range l.few {
		l.many[f] = struct{}{}
	}
	l.few = nil
	l.many[k] = struct{}{}
	return false
}

type checker struct {
	d     *json.Decoder
	stack []level
	// values counts the values read so far.
	values int

	// With collect (Members), the top-level object's members are kept
	// from text, and a Duplicate or Number problem is kept in first
	// while the pass goes on.
	collect bool
	// fold: keys compared as encoding/json matches them to fields
	// (Unmarshal).
	fold    bool
	text    []byte
	members []Member
	from    int64 // where the member being read starts: after its key
	first   *Error
}

// problem ends the pass with e, or, collecting, keeps the first and goes
// on.
func (c *checker) problem(e *Error) error {
	if !c.collect {
		return e
	}
	if c.first == nil {
		c.first = e
	}
	return nil
}

func (c *checker) run() error {
	done := false // the top-level value is complete
	for {
		tok, err := c.d.Token()
		if errors.Is(err, io.EOF) {
			if !done {
				return c.fail(Syntax, "not valid JSON: the text ends before its value does")
			}
			return nil
		}
		if err != nil {
			return c.syntax(err)
		}
		if done {
			return &Error{Kind: Syntax, Path: "$", Detail: "not valid JSON: trailing data after the value"}
		}
		if top := c.top(); top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				done = c.pop()
				continue
			}
			k, _ := tok.(string) // the tokenizer gives only a string or } here
			seen := k
			if c.fold {
				seen = fold(k)
			}
			if top.seen(seen) {
				if e := c.problem(c.fail(Duplicate, fmt.Sprintf("key %.64q is given more than once in the object", k))); e != nil {
					return e
				}
			}
			top.key, top.wantKey = k, false
			if c.collect && len(c.stack) == 1 {
				c.from = c.d.InputOffset()
			}
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(c.stack) >= MaxDepth {
					return c.fail(Depth, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
				}
				if err := c.count(); err != nil {
					return err
				}
				c.stack = append(c.stack, level{object: t == '{', wantKey: t == '{'})
				continue
			case ']':
				done = c.pop()
				continue
			}
		case json.Number:
			if e := c.number(string(t)); e != nil {
				if e := c.problem(e); e != nil {
					return e
				}
			}
		}
		if err := c.count(); err != nil {
			return err
		}
		done = c.value()
	}
}

// count counts a value read, and ends the pass past MaxValues.
func (c *checker) count() error {
	if c.values++; c.values > MaxValues {
		return c.fail(Size, fmt.Sprintf("more than %d values", MaxValues))
	}
	return nil
}

func (c *checker) top() *level {
	if len(c.stack) == 0 {
		return nil
	}
	return &c.stack[len(c.stack)-1]
}

// pop closes the innermost object or array, a value of its parent; it
// reports whether that was the top-level value.
func (c *checker) pop() bool {
	c.stack = c.stack[:len(c.stack)-1]
	return c.value()
}

// value moves past a complete value; it reports whether that was the
// top-level value.
func (c *checker) value() bool {
	top := c.top()
	switch {
	case top == nil:
		return true
	case top.object:
		top.wantKey = true
		if c.collect && len(c.stack) == 1 {
			// The member's value ends here; it starts after the ':'
			// that follows its key.
			v := bytes.TrimLeft(c.text[c.from:c.d.InputOffset()], " \t\r\n:")
			c.members = append(c.members, Member{Name: top.key, Value: v})
		}
	default:
		top.index++
	}
	return false
}

func (c *checker) number(s string) *Error {
	if len(s) > MaxNumberLen {
		return c.fail(Number, fmt.Sprintf("a number of %d characters (at most %d)", len(s), MaxNumberLen))
	}
	if f, err := strconv.ParseFloat(s, 64); math.IsInf(f, 0) || (err != nil && !errors.Is(err, strconv.ErrRange)) {
		return c.fail(Number, fmt.Sprintf("the number %s does not fit a 64-bit float", s))
	}
	return nil
}

func (c *checker) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return c.fail(Syntax, fmt.Sprintf("not valid JSON (at byte %d)", se.Offset))
	}
	return c.fail(Syntax, "not valid JSON")
}

func (c *checker) fail(k Kind, detail string) *Error {
	return &Error{Kind: k, Path: c.path(), Detail: detail}
}

// path names where the checker is, from the root.
func (c *checker) path() string {
	var b strings.Builder
	b.WriteString("$")
	for _, l := range c.stack {
		switch {
		case !l.object:
			fmt.Fprintf(&b, "[%d]", l.index)
		case l.wantKey:
			// between members: the object itself
		case isName(l.key):
			b.WriteString("." + l.key)
		default:
			fmt.Fprintf(&b, "[%.64q]", l.key)
		}
		if b.Len() > 512 {
			return b.String()[:512] + "…"
		}
	}
	return b.String()
}

func isName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
