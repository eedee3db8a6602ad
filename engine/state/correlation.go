package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
)

// Correlation is one correlation term of a wait_event, with its value at the suspension: the
// match has a top-level conjunct EVENT.<Path> == <an expression that does not read EVENT>,
// and Value is that expression's value in canonical form (CorrelationValue). An event can only
// satisfy the match when its own value at Path has the same canonical form, so the wait is
// indexed under one such term and an event looks up the indexes of its values
// (docs/events.md, "Correlation").
type Correlation struct {
	Path  []string `json:"path"`
	Value string   `json:"value"`
}

// MaxCorrelationValue bounds a canonical value kept as it is: a longer one is kept as the
// digest "#" + 64 hex digits of its SHA-256, which both sides compute alike (a digest can
// only make two values share an index, never part two equal ones).
const MaxCorrelationValue = 256

// CorrelationValue is the canonical form of v for the correlation index: two values that are
// equal under the expression language's == have the same form. That == compares every number
// as a float64 (1 == 1.0, an int64 beyond 2^53 as its nearest float64), strings byte for
// byte, booleans by value, and never a string with a number ("1" != 1) — so the form is the
// JSON of the scalar with every number as the float64 it compares as (and -0 as 0). ok is
// false for what no term is indexed by: null (a missing field is null too), objects, arrays,
// NaN and infinities (equal to nothing), and any other type (times, durations, json.Number).
func CorrelationValue(v any) (string, bool) {
	var f float64
	switch x := v.(type) {
	case string, bool:
		return canonicalJSON(x)
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int8:
		f = float64(x)
	case int16:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint:
		f = float64(x)
	case uint8:
		f = float64(x)
	case uint16:
		f = float64(x)
	case uint32:
		f = float64(x)
	case uint64:
		f = float64(x)
	default:
		return "", false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		f = 0 // -0 == 0
	}
	return canonicalJSON(f)
}

func canonicalJSON(v any) (string, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	s := string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if len(s) > MaxCorrelationValue {
		sum := sha256.Sum256([]byte(s))
		s = "#" + hex.EncodeToString(sum[:])
	}
	return s, true
}

// CorrelationValueAt is the canonical form of what EVENT.<path> reads in event data decoded
// from JSON (objects are map[string]any): ok is false when a step is not an object, a field is
// absent, or the value has no canonical form. Expressions read such data the same way — a
// missing field is null, a field of anything but an object fails — so an event whose value
// here has no form cannot satisfy a conjunct EVENT.<path> == <a value with a form>.
func CorrelationValueAt(data any, path []string) (string, bool) {
	cur := data
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[k]; !ok {
			return "", false
		}
	}
	return CorrelationValue(cur)
}
