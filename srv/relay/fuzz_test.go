package relay

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// FuzzParse: any frame either parses into a well-formed envelope or gets a
// protocol error; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}`,
		`{"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}`,
		`{"v":"mvp-0.2","type":"x","payload":null}`,
		`{"v":"mvp-0.1","type":"x"}`, `{"v":"mvp-0.2"}`, `{"v":"mvp-0.2","type":1}`, `[]`, `null`, `{`, "\xff\xfe",
		`{"v":"mvp-0.2","type":"x","payload":"str"}`, `{"v":"mvp-0.2","type":"x","id":{"a":1}}`,
		`{"v":"mvp-0.2","type":"state.updated","payload":{"uiSpec":{"backend\u0044ata":{"k":1}}}}`,
		`{"v":"mvp-0.2","type":"state.updated","payload":{"uiSpec":{"backendData":1},"ui\u0053pec":{}}}`,
		`{"v":"mvp-0.2","type":"snapshot.get","id":"x"}`, `{"v":"mvp-0.2","type":"x","payload":{"n":1e999}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Parse(data)
		if err != nil {
			if err.Code != wire.InvalidMessage || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			if len(env.ID) > maxIDLen {
				t.Fatalf("error names an id of %d bytes", len(env.ID))
			}
			return
		}
		if env.V != wire.Version || env.Type == "" || !utf8.ValidString(env.Type) || strictjson.Check(data) != nil {
			t.Fatalf("accepted %+v", env)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(env.Payload, &obj) != nil || obj == nil {
			t.Fatalf("payload not an object: %s", env.Payload)
		}
		stripped := stripBackendData(env.Payload)
		var v any
		if json.Unmarshal(stripped, &v) != nil {
			t.Fatalf("stripping broke the payload: %s", stripped)
		}
		if hasKey(v, "backendData") {
			t.Fatalf("backendData survived: %s", stripped)
		}
		_ = encode(env) // must not panic
	})
}

func hasKey(v any, k string) bool {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t[k]; ok {
			return true
		}
		for _, c := range t {
			if hasKey(c, k) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if hasKey(c, k) {
				return true
			}
		}
	}
	return false
}
