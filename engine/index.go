package engine

import (
	"encoding/json"
	"regexp"
	"strconv"

	"plaita/engine/state"
)

// Indexed fields (docs/flows.md, "Indexed fields"). A flow may name up to MaxIndexFields
// top-level fields of its INPUT under "index": each execution of the flow is then listed under
// the value it was started with, so that `plaita execution list --index order_id=ord-1` and the
// console's GET /api/executions?index[order_id]=ord-1 find it without reading every execution.
// The value is kept in the execution's state (state.Execution.Index) in the canonical form the
// event correlation uses (state.CorrelationValue): 1 and 1.0 are one value, "1" and 1 two.

// MaxIndexFields bounds the fields one flow indexes: each costs every execution of the flow one
// more index write at its first save.
const MaxIndexFields = 4

// indexFieldRe is the alphabet of indexed field names: an identifier, so that INPUT.<name>
// reads it in an expression, and a safe Redis key segment (store/keys.IndexBy checks it again
// where the key is built).
var indexFieldRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidIndexField reports whether name can be an indexed field: letters, digits and _, not
// starting with a digit, at most 64.
func ValidIndexField(name string) bool { return indexFieldRe.MatchString(name) }

// decodeIndex reads and checks the flow's "index": an array of at most MaxIndexFields
// strings, each a valid name and none twice; a bad entry is a problem at its own path
// (index[2]) and is left out.
func decodeIndex(ps *problems, top map[string]json.RawMessage, f *Flow) {
	var raw []json.RawMessage
	field(ps, top, "", "index", &raw, "an array of INPUT field names")
	if len(raw) > MaxIndexFields {
		ps.add("index", "at most %d fields (%d given): each costs every execution an index write", MaxIndexFields, len(raw))
	}
	first := map[string]string{}
	for i, r := range raw {
		path := "index[" + strconv.Itoa(i) + "]"
		var name string
		if err := json.Unmarshal(r, &name); err != nil {
			ps.add(path, "must be a string: the name of a top-level INPUT field")
			continue
		}
		switch at, dup := first[name]; {
		case !ValidIndexField(name):
			ps.add(path, "%q: name a top-level INPUT field: letters, digits and _, not starting with a digit, at most 64 (no dots: nested fields are not indexed)", name)
		case dup:
			ps.add(path, "duplicate field %q (first at %s)", name, at)
		default:
			first[name] = path
			f.Index = append(f.Index, name)
		}
	}
}

// IndexValues are the indexed values of an execution of f started with input (as NewState
// normalizes it): field → canonical value, for each field whose value is a scalar (a string,
// a number, a boolean). An absent field, null, an object or an array is not indexed. nil when
// nothing is.
func IndexValues(f *Flow, input any) map[string]string {
	m, ok := input.(map[string]any)
	if !ok || len(f.Index) == 0 {
		return nil
	}
	var out map[string]string
	for _, name := range f.Index {
		if v, ok := state.CorrelationValue(m[name]); ok {
			if out == nil {
				out = make(map[string]string, len(f.Index))
			}
			out[name] = v
		}
	}
	return out
}
