package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecode: any payload either decodes into a valid envelope that survives a write/read
// round trip unchanged, or is classified malformed or newer-schema. Nothing panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1"}`,
		`{"schema_version":1,"kind":"start","flow_id":"f"}`,
		`{"schema_version":1,"kind":"resume","execution_id":"ex_1","resume_type":"event","resume_data":{"a":[1,2]}}`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","created_at":1700000000.5,"flow_version":3}`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","created_at":"2026-01-02T03:04:05.000000001+02:00"}`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","config_family":"cf1-a","x":{"y":null}}`,
		"{\"schema_version\":1,\"kind\":\"start\",\"flow_id\":\"f\",\"execution_id\":\"ex_1\",\"input\":{\"h\": \"<b>\u2028&</b>\"},\"z\":[ \"<\" ]}",
		`{"schema_version":2,"kind":"start"}`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","tenant_id":"acme","quota_defer_count":9007199254740993}`,
		`[]`, `null`, `{`, ``, `"x"`, `{"schema_version":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		env, _, err := Decode("q", "1700000000000-0", payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNewerSchema) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("decoded an invalid envelope: %v", err)
		}
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		if direct, err := env.MarshalJSON(); err != nil || string(direct) != string(b) {
			t.Fatalf("MarshalJSON (what Enqueue writes) is not json.Marshal's:\n%s\n%s (%v)", direct, b, err)
		}
		again, derived, err := Decode("q", "1700000000000-0", b)
		if err != nil || derived {
			t.Fatalf("re-decode of %s: %v (derived %v)", b, err, derived)
		}
		b2, err := json.Marshal(again)
		if err != nil || string(b) != string(b2) {
			t.Fatalf("round trip changed the envelope:\n%s\n%s", b, b2)
		}
	})
}

// FuzzPlainScalars: the envelope decoder's fast reads of strings and integers agree with
// encoding/json on every JSON value they accept, and accept what this build writes.
func FuzzPlainScalars(f *testing.F) {
	for _, s := range []string{`"ex_1"`, `"a\"b"`, `"é"`, "\"\xff\"", `"\u00e9"`, `12`, `-7`, `007`,
		`1e3`, `9223372036854775807`, `99999999999999999999`, `"`, `""`, `-`, `null`, `true`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return // the decoder only sees values out of a parsed payload
		}
		if s, ok := plainString(v); ok {
			var want string
			if err := json.Unmarshal(v, &want); err != nil || want != s {
				t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", v, s, want, err)
			}
		}
		if n, ok := plainInt(v); ok {
			var want int
			if err := json.Unmarshal(v, &want); err != nil || want != n {
				t.Fatalf("plainInt(%q) = %d; encoding/json: %d, %v", v, n, want, err)
			}
		}
	})
}

func TestPlainScalarsTakeWhatThisBuildWrites(t *testing.T) {
	for _, v := range []string{`"ex_5da540dfda40db65e9c954d1"`, `"default"`, `"cf1-a"`, `"é"`} {
		if _, ok := plainString([]byte(v)); !ok {
			t.Errorf("plainString(%s) not taken", v)
		}
	}
	for _, v := range []string{`1`, `0`, `-3`, `123456`} {
		if _, ok := plainInt([]byte(v)); !ok {
			t.Errorf("plainInt(%s) not taken", v)
		}
	}
	for _, v := range []string{`"a\"b"`, "\"\xff\"", `1e3`, `1.0`, `99999999999999999999`} {
		_, s := plainString([]byte(v))
		_, i := plainInt([]byte(v))
		if s || i {
			t.Errorf("%s taken by the fast path; encoding/json must decide it", v)
		}
	}
}

// FuzzMembers: where members splits a payload, encoding/json decodes it into the same map
// (keys and value bytes); where it declines, encoding/json is asked. Any valid object with plain
// ASCII keys is split.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a" : "x,}]" , "b":{"c":[1,{"d":"\"}"}]},"e":null}`, `{"a":1,"a":2}`,
		`{"k\u0069nd":"start"}`, `{"é":1}`, `{"a":"é\n"}`, "{\"a\":\t[ ]\r\n}", `[]`, `null`, `"x"`, `{`, ``, `{"a":1}x`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","input":{"x":[1,2,"]"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, ok := members(payload)
		var want map[string]json.RawMessage
		err := json.Unmarshal(payload, &want)
		if !ok {
			if err == nil && want != nil && plainKeys(want) && validObject(payload) {
				t.Fatalf("declined %q, a valid object of plain keys", payload)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: split into %v, encoding/json refuses it: %v", payload, got, err)
		}
		// Every member encoding/json keeps is got's last of that name, and got has no other.
		seen := map[string]bool{}
		for _, m := range got {
			seen[m.key] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("%q: split into %v, encoding/json says %v", payload, got, want)
		}
		for k, v := range want {
			if g, _ := got.get(k); string(g) != string(v) {
				t.Fatalf("%q: member %q is %q, encoding/json says %q", payload, k, g, v)
			}
		}
	})
}

// TestKnownNamesAreNotCopied: members takes every known field's key without a copy.
func TestKnownNamesAreNotCopied(t *testing.T) {
	for _, k := range knownFields {
		b := []byte(k)
		if got := knownName(b); got != k {
			t.Fatalf("knownName(%q) = %q", k, got)
		}
		if n := testing.AllocsPerRun(10, func() { _ = knownName(b) }); n != 0 {
			t.Errorf("knownName(%q) copies the key (%v allocations)", k, n)
		}
	}
}

func plainKeys(m map[string]json.RawMessage) bool {
	for k := range m {
		for i := 0; i < len(k); i++ {
			if k[i] >= 0x80 || k[i] == '\\' || k[i] == '"' || k[i] < 0x20 {
				return false
			}
		}
	}
	return true
}

// validObject: the payload itself spells its keys plainly (no escapes, as members requires).
func validObject(payload []byte) bool { return !strings.Contains(string(payload), `\`) }
