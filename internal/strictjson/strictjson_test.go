package strictjson

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestCheckAccepts(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `0`, `"x"`, ` {"a":1} `, "\n[1,2]\t",
		`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, // one key per object, however often across them
		`{"a":1,"A":2}`,     // keys are case-sensitive
		`{"":1,"\u0000":2}`, // the empty key and NUL are two keys
		`[1.7976931348623157e308,-1.7976931348623157e308,5e-324,1e-999999,0.1000000000000000055511151231257827021181583404541015625]`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		`[{}` + strings.Repeat(`,{}`, MaxValues-2) + `]`,     // the array and its objects: MaxValues
		`{"k":[0` + strings.Repeat(`,0`, MaxValues-3) + `]}`, // the object, the array and its numbers: a key is no value
	} {
		if err := Check([]byte(s)); err != nil {
			t.Errorf("Check(%.80s) = %v, want nil", s, err)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	many := `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k9":9}`
	for _, c := range []struct {
		in   string
		kind Kind
		path string
	}{
		{`{"uiSpec":{"backendData":"SECRET"},"uiSpec":{"v":1}}`, Duplicate, "$"},
		{`{"uiSpec":{"a":[{"b":{"backendData":"SECRET"}}],"a":0}}`, Duplicate, "$.uiSpec"},
		{`{"a":[{"b":1},{"c":1,"c":2}]}`, Duplicate, "$.a[1]"},
		{`[[0],[1,{"x":{"y":1,"y":1}}]]`, Duplicate, "$[1][1].x"},
		{`{"a":1,"\u0061":2}`, Duplicate, "$"},
		{`{"backendData":1,"backend\u0044ata":2}`, Duplicate, "$"},
		{`{"a b":{"z":1,"z":2}}`, Duplicate, `$["a b"]`},
		{many, Duplicate, "$"},
		{`{"a":1e999999}`, Number, "$.a"},
		{`[-1e309]`, Number, "$[0]"},
		{`{"n":` + strings.Repeat("9", MaxNumberLen+1) + `}`, Number, "$.n"},
		{`{"n":0.` + strings.Repeat("0", MaxNumberLen) + `}`, Number, "$.n"},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), Depth, ("$" + strings.Repeat("[0]", MaxDepth))[:512] + "…"}, // a path is cut
		{`[{}` + strings.Repeat(`,{}`, MaxValues-1) + `]`, Size, "$[199999]"},
		{`{"a":[[` + strings.Repeat(`],[`, MaxValues) + `]]}`, Size, "$.a[199998]"},
		{`{"a":[0` + strings.Repeat(`,0`, MaxValues) + `]}`, Size, "$.a[199998]"},
		{`{"a":["",null,true` + strings.Repeat(`,""`, MaxValues) + `]}`, Size, "$.a[199998]"},
		{``, Syntax, "$"},
		{`   `, Syntax, "$"},
		{`{"a":1`, Syntax, "$"},
		{`{"a":1,}`, Syntax, "$"},
		{`{} {}`, Syntax, "$"},
		{`{}x`, Syntax, "$"},
		{`[1,]`, Syntax, "$[1]"},
		{`{"a" 1}`, Syntax, "$.a"},
		{`"\x"`, Syntax, "$"},
		{`01`, Syntax, "$"},
	} {
		err := Check([]byte(c.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Check(%.80s) = %v, want a %d error", c.in, err, c.kind)
			continue
		}
		if e.Kind != c.kind || e.Path != c.path || e.Detail == "" {
			t.Errorf("Check(%.80s) = %+v, want kind %d at %s", c.in, e, c.kind, c.path)
		}
	}
}

// FuzzCheck: what Check takes, encoding/json takes; what it refuses, it
// says why and where.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[1e999]`, `{"a":[{"b":"\u0062"}]}`, `[`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("Check took %q, which is not JSON", b)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Detail == "" || !strings.HasPrefix(e.Path, "$")) {
			t.Fatalf("Check(%q) = %#v", b, err)
		}
	})
}

// BenchmarkCheck measures the worst texts per byte: MaxValues one-digit
// numbers, and as many one-key members, the most a text may hold.
func BenchmarkCheck(b *testing.B) {
	var keys strings.Builder
	keys.WriteString("{")
	for i := range MaxValues - 1 { // the object and its members' values
		if i > 0 {
			keys.WriteString(",")
		}
		keys.WriteString(`"` + strconv.FormatInt(int64(i), 36) + `":0`)
	}
	keys.WriteString("}")
	for name, text := range map[string]string{
		"numbers": "[" + strings.Repeat("0,", MaxValues-2) + "0]",
		"keys":    keys.String(),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if err := Check([]byte(text)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMembers: the top-level members come as written, from the same pass
// that checks the text; a duplicate key or a number out of range below
// or at the top does not end it (the first problem is the error), a text
// that is no JSON or nested too deep does.
func TestMembers(t *testing.T) {
	type m = []string // name, value, name, value, ...
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for _, c := range []struct {
		in   string
		want m
		kind Kind
	}{
		{` { "a" : 1 , "m\u0065thod":"x\"y", "o": {"p":[1, {"q":null}]} ,"e":[] } `, m{"a", "1", "method", `"x\"y"`, "o", `{"p":[1, {"q":null}]}`, "e", "[]"}, 0},
		{"{\n\t\"a\"\r\n:\ttrue}", m{"a", "true"}, 0},
		{`{}`, nil, 0},
		{`[{"a":1}]`, nil, 0},
		{`"x"`, nil, 0},
		{`{"id":1,"id":2,"x":3}`, m{"id", "1", "id", "2", "x", "3"}, Duplicate},
		{`{"p":{"a":1,"a":2},"id":7}`, m{"p", `{"a":1,"a":2}`, "id", "7"}, Duplicate},
		{`{"n":1e999999,"id":8,"d":{"b":1,"b":2}}`, m{"n", "1e999999", "id", "8", "d", `{"b":1,"b":2}`}, Number},
		{`{"id":9,"p":` + deep + `,"q":1}`, m{"id", "9"}, Depth},
		{`{"id":10,"p":[1,}`, m{"id", "10"}, Syntax},
		{`{"id":11} {}`, m{"id", "11"}, Syntax},
	} {
		ms, err := Members([]byte(c.in))
		var got m
		for _, x := range ms {
			got = append(got, x.Name, string(x.Value))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Members(%.60s) = %q, want %q", c.in, got, c.want)
		}
		var e *Error
		switch {
		case c.kind == 0 && err != nil:
			t.Errorf("Members(%.60s): %v", c.in, err)
		case c.kind != 0 && (!errors.As(err, &e) || e.Kind != c.kind):
			t.Errorf("Members(%.60s): %v, want kind %d", c.in, err, c.kind)
		}
		if cerr := Check([]byte(c.in)); (cerr == nil) != (err == nil) {
			t.Errorf("Members(%.60s): %v, Check: %v", c.in, err, cerr)
		}
	}
}

// TestUnmarshal: keys are compared as encoding/json matches them to
// fields, so two that name one field in different cases, or by a letter
// Unicode folds with another (the Kelvin sign and K, ſ and s), are a key
// given twice; a key of no field, a value of another type and a second
// value are refused; the rest decodes as encoding/json does.
func TestUnmarshal(t *testing.T) {
	type msg struct {
		Key  string `json:"key"`
		Seen int    `json:"seen"`
		Sub  struct {
			Ask string `json:"ask"`
		} `json:"sub"`
	}
	for _, text := range []string{
		`{"key":"a","Key":"b"}`,
		`{"key":"a","KEY":"b"}`,
		`{"key":"a","\u212aey":"b"}`, // KELVIN SIGN
		`{"seen":1,"\u017feen":2}`,   // LATIN SMALL LETTER LONG S
		`{"sub":{"ask":"a","aSk":"b"}}`,
		`{"key":"a","\u006bey":"b"}`,
		`{"key":"a","other":1}`,
		`{"seen":"1"}`,
		`{"key":"a"} {"key":"b"}`,
		`{"seen":1e999}`,
	} {
		var m msg
		if err := Unmarshal([]byte(text), &m); err == nil {
			t.Errorf("%s: taken as %+v", text, m)
		}
	}
	var m msg
	if err := Unmarshal([]byte(` {"KEY":"a","seen":2,"sub":{"Ask":"q"}} `), &m); err != nil || m.Key != "a" || m.Seen != 2 || m.Sub.Ask != "q" {
		t.Errorf("one meaning: %+v %v", m, err)
	}
	var e *Error
	if err := Unmarshal([]byte(`{"key":"a","Key":"b"}`), &m); !errors.As(err, &e) || e.Kind != Duplicate {
		t.Errorf("a key given twice: %v, want a Duplicate *Error", err)
	}
}
