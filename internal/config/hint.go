package config

import (
	"encoding"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// settingKeys returns the keys a config struct reads, a table's as
// "table.key", in the struct's order.
func settingKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	text := reflect.TypeFor[encoding.TextUnmarshaler]()
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(text) {
			keys = append(keys, settingKeys(ft, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// unknownKeys says, for each key of the file the binary does not read,
// what to write instead: a misspelt key is most often one or two letters
// off a real one, or a real key in the wrong table. A table of unknown
// keys is not named on its own: its keys are.
func unknownKeys(unknown, known []string) string {
	var out []string
	for _, u := range unknown {
		if slices.ContainsFunc(unknown, func(o string) bool { return strings.HasPrefix(o, u+".") }) {
			continue
		}
		out = append(out, u+" ("+hint(u, known)+")")
	}
	return strings.Join(out, ", ")
}

func hint(u string, known []string) string {
	table, leaf := splitKey(u)
	best, bestDist := "", 0
	for _, k := range known {
		kt, kl := splitKey(k)
		// The same key in another table is the likeliest mistake; then a
		// key a few letters off, in the same table or in another one
		// whose name is itself a few letters off.
		d := editDistance(leaf, kl)*2 + editDistance(table, kt)
		if kl == leaf {
			d = editDistance(table, kt)
			if d > 0 {
				d = 1
			}
		}
		if best == "" || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && bestDist <= 2*max(2, len(leaf)/4) {
		return "did you mean " + display(best) + "?"
	}
	var inTable, top []string
	tables := []string{}
	for _, k := range known {
		kt, kl := splitKey(k)
		switch {
		case kt == table && table != "":
			inTable = append(inTable, kl)
		case kt == "":
			top = append(top, kl)
		default:
			if t := "[" + kt + "]"; !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
	}
	if len(inTable) > 0 {
		return fmt.Sprintf("[%s] holds %s", table, strings.Join(inTable, ", "))
	}
	return fmt.Sprintf("the file holds %s and the tables %s", strings.Join(top, ", "), strings.Join(tables, ", "))
}

// splitKey cuts "a.b.c" into its table "a.b" and its key "c".
func splitKey(k string) (table, leaf string) {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return "", k
}

// display writes a key as the file does: "[table] key", or the key alone
// at the top.
func display(k string) string {
	if table, leaf := splitKey(k); table != "" {
		return "[" + table + "] " + leaf
	}
	return k
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (keys are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// incompatible is the TOML decoder's error for a value of the wrong type,
// which it gives only as text.
var incompatible = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]+)"\): incompatible types: TOML value has type (\S+); destination has type (\S+)$`)

// wrongType rewrites the TOML decoder's "incompatible types: TOML value
// has type string; destination has type integer" as the key the file
// writes, the type it must be, and how to write one.
func wrongType(err error) (string, bool) {
	m := incompatible.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return wrongTypeAt(m[1], display(m[2]), m[3], m[4]), true
}

// wrongTypeAt says that the setting written name at line is of type got
// where it must be of type want (as the TOML decoder names them), and
// how to write one.
func wrongTypeAt(line, name, got, want string) string {
	words := map[string]string{"slice": "list", "array": "list", "int64": "integer", "float64": "float", "bool": "boolean"}
	for _, t := range []*string{&got, &want} {
		if n, ok := words[*t]; ok {
			*t = n
		}
	}
	how := ""
	switch {
	case want == "boolean":
		how = ": write true or false, without quotes"
	case got == "string" && (want == "integer" || want == "float"):
		how = ": write it without quotes"
	case want == "string":
		how = ": write it in quotes"
	case want == "list":
		how = `: write it in brackets, e.g. ["a", "b"]`
	}
	return fmt.Sprintf("line %s: %s must be %s, not %s%s", line, name, withArticle(want), withArticle(got), how)
}

func withArticle(noun string) string {
	if strings.IndexByte("aeiou", noun[0]) >= 0 {
		return "an " + noun
	}
	return "a " + noun
}

// Closest is the word among the given ones that w is a slip of (at most
// two letters off), or "" when none is.
func Closest(w string, among ...string) string {
	best, bestD := "", 3
	for _, a := range among {
		if d := editDistance(w, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}
