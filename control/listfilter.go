package control

import (
	"encoding/json"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// Filters of an executions list beyond status and flow: the start time and the fields flows
// index (docs/flows.md, "Indexed fields"). The CLI (execution list --started-after
// --started-before --index) and the console (GET /api/executions?started_after=
// &started_before=&index[field]=) pass them as they were given; they are checked and turned
// into the store's terms here, once.

// IndexFilter is one field=value filter as given: Value is parsed as JSON when it parses
// (order_id=17 is the number 17, order_id="17" the string), else taken as a string
// (order_id=ord-1).
type IndexFilter struct {
	Field string `json:"field"`
	Value string `json:"value"`
}

// ParseIndexFilter reads "field=value" (the CLI's --index): the field is what comes before the
// first '='.
func ParseIndexFilter(s string) (IndexFilter, error) {
	field, value, ok := strings.Cut(s, "=")
	if !ok || field == "" {
		return IndexFilter{}, refuse(Invalid, "invalid_index_filter", nil, "index filter %q: write field=value (order_id=ord-1)", s)
	}
	return IndexFilter{Field: field, Value: value}, nil
}

// indexTerms checks the filters and gives their canonical terms: a field a flow can index, a
// value of a kind that is indexed (a string, a number, a boolean), at most as many fields as
// one flow indexes (more can match nothing).
func indexTerms(filters []IndexFilter) ([]store.IndexTerm, error) {
	if len(filters) > engine.MaxIndexFields {
		return nil, refuse(Invalid, "invalid_index_filter", nil,
			"%d index filters: at most %d (a flow indexes at most %d fields, and every filter must hold)", len(filters), engine.MaxIndexFields, engine.MaxIndexFields)
	}
	terms := make([]store.IndexTerm, 0, len(filters))
	for _, f := range filters {
		bad := func(format string, a ...any) error {
			r := refuse(Invalid, "invalid_index_filter", nil, "index filter %s=%s: "+format, append([]any{f.Field, f.Value}, a...)...)
			r.Fields = map[string]any{"field": f.Field}
			return r
		}
		if !engine.ValidIndexField(f.Field) {
			return nil, bad("%q is no field a flow can index (letters, digits and _, not starting with a digit, at most 64)", f.Field)
		}
		var v any = f.Value
		if err := json.Unmarshal([]byte(f.Value), &v); err != nil {
			v = f.Value // not JSON: the text itself
		}
		c, ok := state.CorrelationValue(v)
		if !ok {
			return nil, bad("only strings, numbers and booleans are indexed (not null, objects or arrays)")
		}
		terms = append(terms, store.IndexTerm{Field: f.Field, Value: c})
	}
	return terms, nil
}

// checkTimeRange refuses a range that can hold nothing.
func checkTimeRange(after, before time.Time) error {
	if !after.IsZero() && !before.IsZero() && !before.After(after) {
		r := refuse(Invalid, "invalid_time_range", nil, "started_before %s is not later than started_after %s: no execution can be in that range",
			before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
		r.Fields = map[string]any{"field": "started_before"}
		return r
	}
	return nil
}

// ParseListTime reads a start-time bound: RFC 3339 (fractions of seconds allowed).
func ParseListTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, refuse(Invalid, "invalid_time", err, "%s %q: use RFC 3339, e.g. 2026-03-01T12:00:00Z", name, s)
	}
	return t, nil
}
