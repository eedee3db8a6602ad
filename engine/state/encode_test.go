package state

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// sameAsMarshal fails t unless AppendJSON writes what json.Marshal writes for e, or both
// refuse it.
func sameAsMarshal(t *testing.T, e *Execution) {
	t.Helper()
	want, wantErr := json.Marshal(e)
	prefix := []byte("prefix:")
	got, err := AppendJSON(bytes.Clone(prefix), e)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal error %v", err, wantErr)
	}
	if wantErr != nil {
		if err.Error() != wantErr.Error() || !bytes.Equal(got, prefix) {
			t.Fatalf("refused as %q with %q appended, json.Marshal refuses it as %q", err, got, wantErr)
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendJSON wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}

// TestAppendJSONCoversEveryField: a state with every field set, down to the structs it holds,
// encodes as json.Marshal encodes it, so a field added to the state and not to AppendJSON
// fails here.
func TestAppendJSONCoversEveryField(t *testing.T) {
	var e Execution
	fill(t, reflect.ValueOf(&e).Elem(), "state")
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	// Every field holds a value, so every field's name is in the encoding: none was left zero
	// (an omitempty field left zero would be missing from both encodings and prove nothing).
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if n := reflect.TypeFor[Execution]().NumField(); len(top) != n {
		t.Fatalf("%d of the state's %d fields encoded: %s", len(top), n, b)
	}
	sameAsMarshal(t, &e)
}

// fill sets v, and everything it holds, to values that are not zero.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(path + " <&> \u2028")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), path+"[0]")
		fill(t, v.Index(1), path+"[1]")
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, k := range []string{"b", "a"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, path+"."+k)
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"n": 1.5, "s": path, "l": []any{true, nil, 1e21}}))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 6, 3, 4, 5, 6, time.FixedZone("", 3600))))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: fill does not know %s", path, v.Type())
	}
}

// TestAppendJSONAsMarshal: states JSON cannot decode to — Go values of other types in the
// context, strings that are not UTF-8, times and numbers JSON cannot hold, a cycle — encode as
// json.Marshal encodes them, or are refused as it refuses them.
func TestAppendJSONAsMarshal(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cycle := map[string]any{}
	cycle["self"] = cycle
	type custom struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	for name, e := range map[string]*Execution{
		"empty":         {},
		"nil maps":      {ExecutionID: "ex_1", Context: nil, NodeTimings: map[string]*NodeTiming{"n": nil}, Branches: map[string]map[string]int{"n": nil}},
		"escapes":       {ExecutionID: "a\"b\\c\n\t\r\b\f\x00\x1f<>&\u2028\u2029é😀", Input: "\xff\xfe ok \xc3"},
		"invalid utf-8": {Context: map[string]any{"\xff": "\xed\xa0\x80"}},
		"numbers":       {Input: []any{0.0, math.Copysign(0, -1), 1e-7, 1e-6, 1e20, 1e21, 123456789.125, -2.5e-300, math.MaxFloat64, 5e-324}},
		"go types":      {Input: map[string]any{"i": 3, "u": uint8(4), "f32": float32(0.1), "n": json.Number("12.5"), "t": at, "d": time.Second, "raw": json.RawMessage(` { "x" : "<" } `), "c": custom{A: 1}, "p": &custom{B: "&"}, "m": map[string]int{"z": 1, "a": 2}, "b": []byte("hi")}},
		"nan":           {Output: math.NaN()},
		"infinity":      {Context: map[string]any{"x": []any{math.Inf(-1)}}},
		"year 10000":    {StartTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year -1":       {LastUpdate: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year 0":        {LastUpdate: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		"zone 23:59":    {StartTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60))},
		"zone 24h":      {Suspend: &Suspend{Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))}},
		"zone seconds":  {EndTime: &at, Suspend: &Suspend{Due: new(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", -(5*3600+30))))}},
		"unmarshalable": {Output: map[string]any{"ch": make(chan int)}},
		"cycle":         {Context: cycle},
		"deep":          {Input: nest(1500)},
		"correlation":   {Suspend: &Suspend{Kind: SuspendEvent, Correlation: []Correlation{{Path: nil, Value: "1"}, {Path: []string{"a", "<b>"}}}}},
		"no omitted":    {Index: map[string]string{}, NodeAttempts: map[string]int{}, Timeline: []TimelineEntry{}, Suspend: nil},
	} {
		t.Run(name, func(t *testing.T) { sameAsMarshal(t, e) })
	}
}

func nest(depth int) any {
	var v any = "bottom"
	for range depth {
		v = []any{map[string]any{"x": v}}
	}
	return v
}

// FuzzAppendJSON: whatever state JSON decodes to, AppendJSON writes what json.Marshal writes.
func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte(`{"execution_id":"ex_e088dacced81ba159a82a726","tenant_id":"default","flow_id":"bench-1","flow_version":"1","flow_hash":"c0fd","flow_hash_algo":"sha256-canonical-json-v1","engine_version":"plaita-go/1","status":"completed","current_node":"s1","input":{},"context":{"$NODE":{"s1":"ok"}},"node_timings":{"s1":{"runs":1,"first_started":"2026-12-06T03:19:51.266822016Z","last_started":"2026-12-06T03:19:51.266822016Z","last_ended":"2026-12-06T03:19:51.266822798Z","total_ms":0}},"step_count":1,"output":"ok","start_time":"2026-12-06T03:19:51.266816176Z","last_update_time":"2026-12-06T03:19:51.266822798Z","end_time":"2026-12-06T03:19:51.266825543Z","timeline":[{"seq":1,"time":"2026-12-06T03:19:51.266816176Z","node":"s1","event":"started"},{"seq":2,"time":"2026-12-06T03:19:51.26682373Z","node":"s1","event":"step"},{"seq":3,"time":"2026-12-06T03:19:51.266825623Z","node":"s1","event":"completed"}],"branches":{}}`))
	f.Add([]byte(`{"execution_id":"ex_2","status":"suspended","input":{"order":{"id":"o-1","lines":[{"sku":"a","qty":2,"price":9.99}],"note":"<b>&amp;</b> \u2028"}},"context":{"$NODE":{"h":{"RESPONSE":{"status":200,"body":{"ok":true,"v":[1,2.5e-7,1e21,null]}}}},"$VARS":{"n":3}},"suspend":{"kind":"event","node":"w","since":"2026-01-02T03:04:05+01:00","due":"2026-01-02T04:04:05-05:30","event_type":"payment","match":"EVENT.id == INPUT.order.id","correlation":[{"path":["id"],"value":"\"o-1\""}]},"error":{"type":"http","message":"boom","node":"h","permanent":true},"index":{"order":"\"o-1\""},"last_resume":{"type":"event","node":"w","key":"1-0","at":"2026-01-02T03:04:05Z"},"node_attempts":{"h":2},"timeline_dropped":4,"branches":{"c":{"true":1,"case 2":3}},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b"}`))
	f.Add([]byte(`{"context":null,"node_timings":{"x":null},"branches":null,"output":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e Execution
		if json.Unmarshal(raw, &e) != nil {
			return
		}
		sameAsMarshal(t, &e)
	})
}

// BenchmarkAppendJSON encodes a fresh start's completed state, the one every 1-node
// execution saves, with AppendJSON and with json.Marshal.
func BenchmarkAppendJSON(b *testing.B) {
	var e Execution
	raw := []byte(`{"execution_id":"ex_e088dacced81ba159a82a726","tenant_id":"default","flow_id":"bench-1","flow_version":"1","flow_hash":"c0fd4fc2fcefb0dd10ef25804e70b35e7cf807f9785baaae8f3ea2d9bb863795","flow_hash_algo":"sha256-canonical-json-v1","engine_version":"plaita-go/1","status":"completed","current_node":"s1","input":{},"context":{"$NODE":{"s1":"ok"}},"node_timings":{"s1":{"runs":1,"first_started":"2026-12-06T03:19:51.266822016Z","last_started":"2026-12-06T03:19:51.266822016Z","last_ended":"2026-12-06T03:19:51.266822798Z","total_ms":0}},"step_count":1,"output":"ok","start_time":"2026-12-06T03:19:51.266816176Z","last_update_time":"2026-12-06T03:19:51.266822798Z","end_time":"2026-12-06T03:19:51.266825543Z","timeline":[{"seq":1,"time":"2026-12-06T03:19:51.266816176Z","node":"s1","event":"started"},{"seq":2,"time":"2026-12-06T03:19:51.26682373Z","node":"s1","event":"step"},{"seq":3,"time":"2026-12-06T03:19:51.266825623Z","node":"s1","event":"completed"}],"branches":{}}`)
	if err := json.Unmarshal(raw, &e); err != nil {
		b.Fatal(err)
	}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendJSON(nil, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON into 1280 bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendJSON(make([]byte, 0, 1280), &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON reused buffer", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = AppendJSON(buf[:0], &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
