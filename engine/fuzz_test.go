package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// addFlowSeeds adds every flow of testdata (good and bad) to the corpus.
func addFlowSeeds(f *testing.F) {
	for _, dir := range []string{"../examples", "../testdata/invalid-flows"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(countFlow))
	f.Add([]byte(`{"id":"x","start":"a","nodes":[{"id":"a","type":"end"}]}`))
	f.Add([]byte(`{"id":"x","start":"a","nodes":[{"id":"a","type":"switch","cases":[{"when":"INPUT.k","next":"a"}],"default":"b"},{"id":"b","type":"end"}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"nodes":{}}`))
}

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzParse: no input makes the parser or the executor panic; what parses has a stable hash
// and runs to a step boundary the store accepts.
func FuzzParse(f *testing.F) {
	addFlowSeeds(f)
	reg := NewRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		flow, err := Parse(data, reg, DefaultExprLimits)
		if err != nil {
			if flow != nil {
				t.Fatal("a flow returned with an error")
			}
			return
		}
		if !hexHash.MatchString(flow.Hash) {
			t.Fatalf("hash %q", flow.Hash)
		}
		if again, err := Parse(data, reg, DefaultExprLimits); err != nil || again.Hash != flow.Hash {
			t.Fatalf("re-parse: %v, hash %s vs %s", err, again.Hash, flow.Hash)
		}
		mem := store.NewMemory()
		set := DefaultSettings()
		set.Deadline = 20 * time.Millisecond
		set.TimelineMax = 10
		ex := &Executor{Store: mem, Clock: SystemClock{}, Settings: func() Settings { return set }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := ex.Start(ctx, flow, StartRequest{Input: map[string]any{"k": true, "n": 1}})
		if err != nil {
			return // the context ran out: a checkpoint is saved
		}
		switch st.Status {
		case state.Completed, state.Error, state.Suspended, state.Cancelled:
		default:
			t.Fatalf("run ended with status %s", st.Status)
		}
		if _, err := mem.Load(context.Background(), st.ExecutionID); err != nil {
			t.Fatalf("stored state does not load: %v", err)
		}
	})
}

// FuzzTemplate: any template either fails to compile or evaluates without panicking.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"plain", "{{ INPUT.n + 1 }}", "a {{ INPUT.name }} b {{ VARS.i }}", "{{", "}}{{", "{{ }}",
		"{{ repeat('x', 99999999) }}", "{{ NODE['n-2'].ok ? 1 : 2 }}", "{{ map(INPUT.tags, # + '!') }}", "{{ 1/0 }}", "{{ 0.0/0.0 }}"} {
		f.Add(s)
	}
	lim := ExprLimits{MaxResultSize: 10000, GrowthFactor: 4, MaxResultHard: 100000}
	f.Fuzz(func(t *testing.T, src string) {
		v, err := compileValue(src, lim)
		if err != nil {
			return
		}
		out, err := v.Eval(env(), lim)
		if err != nil {
			return
		}
		if n, over := sizeOf(out, lim.MaxResultHard); over {
			t.Fatalf("result of %d bytes passed the hard limit", n)
		}
	})
}

// FuzzNormalize: where normalize's copy takes a value, the copy equals the value's trip
// through JSON; values it leaves to encoding/json (NaN, invalid UTF-8, other types, deep
// shapes) still come out as encoding/json says.
func FuzzNormalize(f *testing.F) {
	f.Add("ok", 1.5, uint8(0), int64(3))
	f.Add("\xff", math.NaN(), uint8(2), int64(-1))
	f.Add("a\u2028<b>&", math.Inf(1), uint8(80), int64(1<<60))
	f.Add("", math.Copysign(0, -1), uint8(65), int64(0))
	f.Fuzz(func(t *testing.T, s string, x float64, nest uint8, n int64) {
		var v any = map[string]any{"s": s, "k" + s: []any{x, s, map[string]any{"n": nil, "e": []any{}}, true, nil}}
		for range nest {
			v = []any{v}
		}
		if n%2 == 0 {
			v = map[string]any{"i": n, "v": v} // an int: not JSON's own type
		}
		got, ok := jsonCopy(v, 0)
		var want any
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &want)
		}
		if err == nil {
			err = state.CheckDepth(b) // what storage must never be given
		}
		if !ok {
			norm, nerr := normalize(v)
			if (nerr == nil) != (err == nil) || (err == nil && !reflect.DeepEqual(norm, want)) {
				t.Fatalf("normalize = %#v, %v; encoding/json: %#v, %v", norm, nerr, want, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("jsonCopy took a value encoding/json rejects: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("jsonCopy = %#v; encoding/json: %#v", got, want)
		}
	})
}
