package state

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the JSON of e to b: the same bytes json.Marshal(e) writes, made without
// reflection. Every save of a run encodes its state: json.Marshal took 3.3 µs and 12
// allocations for a 1-node state, this takes 0.9 µs into a buffer of its size (store.Encode
// makes one). What the fast path does not know — a context value of a type
// other than what JSON decodes to (a node that returns its own type), a time or a number JSON
// cannot hold, a nesting deep enough to be a cycle — it hands to json.Marshal, for the value
// or for the whole state, so the bytes and the errors stay encoding/json's own.
// FuzzAppendJSON and TestAppendJSONCoversEveryField hold it to json.Marshal.
func AppendJSON(b []byte, e *Execution) ([]byte, error) {
	if e == nil {
		return append(b, "null"...), nil
	}
	w := jsonWriter{b: b, start: len(b)}
	w.execution(e)
	if w.fallback {
		whole, err := json.Marshal(e)
		if err != nil {
			return b, err
		}
		return append(b[:w.start], whole...), nil
	}
	return w.b, nil
}

// maxDepth is where encoding/json starts looking for cycles; past it the state goes to
// json.Marshal, which reports one instead of recursing for ever.
const maxDepth = 1000

// jsonWriter appends one state. fallback set means its bytes are to be thrown away: a value
// only encoding/json can encode exactly (or refuse) was met. first is true right after an
// object or array opens: its first member goes without a comma.
type jsonWriter struct {
	b        []byte
	start    int
	fallback bool
	first    bool
}

func (w *jsonWriter) open(c byte) {
	w.b = append(w.b, c)
	w.first = true
}

func (w *jsonWriter) close(c byte) {
	w.b = append(w.b, c)
	w.first = false
}

// next separates a member or an element from the one before it.
func (w *jsonWriter) next() {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
}

func (w *jsonWriter) key(name string) {
	w.next()
	w.b = append(w.b, '"')
	w.b = append(w.b, name...) // field names are plain ASCII: nothing to escape
	w.b = append(w.b, '"', ':')
}

func (w *jsonWriter) mapKey(k string) {
	w.next()
	w.str(k)
	w.b = append(w.b, ':')
}

func (w *jsonWriter) strField(name, s string) {
	w.key(name)
	w.str(s)
}

// strOmit is strField of a field tagged omitempty.
func (w *jsonWriter) strOmit(name, s string) {
	if s != "" {
		w.strField(name, s)
	}
}

func (w *jsonWriter) intField(name string, n int64) {
	w.key(name)
	w.int(n)
}

func (w *jsonWriter) null() { w.b = append(w.b, "null"...) }

func (w *jsonWriter) str(s string) { w.b = appendString(w.b, s) }

func (w *jsonWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

func (w *jsonWriter) time(t time.Time) {
	n0 := len(w.b)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
	// Time.MarshalJSON refuses what is not RFC 3339: a year that is not four digits, a zone
	// offset of 24 hours or more. encoding/json says so in its own words.
	s := w.b[n0+1 : len(w.b)-1]
	if len(s) < 5 || s[4] != '-' {
		w.fallback = true
		return
	}
	if s[len(s)-1] != 'Z' {
		c := s[len(s)-len("Z07:00")]
		h := s[len(s)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			w.fallback = true
		}
	}
}

func (w *jsonWriter) execution(e *Execution) {
	w.open('{')
	w.strField("execution_id", e.ExecutionID)
	w.strField("tenant_id", e.TenantID)
	w.strField("flow_id", e.FlowID)
	w.strField("flow_version", e.FlowVersion)
	w.strField("flow_hash", e.FlowHash)
	w.strField("flow_hash_algo", e.FlowHashAlgo)
	w.strField("engine_version", e.Engine)
	w.strField("status", string(e.Status))
	w.strField("current_node", e.CurrentNode)
	w.key("input")
	w.value(e.Input, 1)
	w.key("context")
	w.object(e.Context, 1)
	w.key("node_timings")
	writeMap(w, e.NodeTimings, w.nodeTiming)
	w.intField("step_count", int64(e.StepCount))
	if e.Suspend != nil {
		w.key("suspend")
		w.suspend(e.Suspend)
	}
	if e.Error != nil {
		w.key("error")
		w.errorInfo(e.Error)
	}
	if e.Output != nil {
		w.key("output")
		w.value(e.Output, 1)
	}
	w.key("start_time")
	w.time(e.StartTime)
	w.key("last_update_time")
	w.time(e.LastUpdate)
	if e.EndTime != nil {
		w.key("end_time")
		w.time(*e.EndTime)
	}
	if len(e.Index) > 0 {
		w.key("index")
		writeMap(w, e.Index, w.str)
	}
	if e.LastResume != nil {
		w.key("last_resume")
		w.resumeMark(e.LastResume)
	}
	if len(e.NodeAttempts) > 0 {
		w.key("node_attempts")
		w.intMap(e.NodeAttempts)
	}
	if len(e.Timeline) > 0 {
		w.key("timeline")
		w.timeline(e.Timeline)
	}
	if e.TimelineDropped != 0 {
		w.intField("timeline_dropped", int64(e.TimelineDropped))
	}
	w.key("branches")
	writeMap(w, e.Branches, w.intMap)
	w.strOmit("traceparent", e.TraceParent)
	w.strOmit("tracestate", e.TraceState)
	w.close('}')
}

func (w *jsonWriter) nodeTiming(t *NodeTiming) {
	if t == nil {
		w.null()
		return
	}
	w.open('{')
	w.intField("runs", int64(t.Runs))
	w.strField("first_started", string(t.FirstStart))
	w.strField("last_started", string(t.LastStart))
	w.strField("last_ended", string(t.LastEnd))
	w.intField("total_ms", t.TotalMillis)
	w.close('}')
}

func (w *jsonWriter) suspend(s *Suspend) {
	w.open('{')
	w.strField("kind", s.Kind)
	w.strField("node", s.Node)
	w.key("since")
	w.time(s.Since)
	if s.Due != nil {
		w.key("due")
		w.time(*s.Due)
	}
	w.strOmit("event_type", s.EventType)
	w.strOmit("match", s.Match)
	w.strOmit("message", s.Message)
	if len(s.Correlation) > 0 {
		w.key("correlation")
		w.open('[')
		for _, c := range s.Correlation {
			w.next()
			w.open('{')
			w.key("path")
			if c.Path == nil {
				w.null()
			} else {
				w.open('[')
				for _, p := range c.Path {
					w.next()
					w.str(p)
				}
				w.close(']')
			}
			w.strField("value", c.Value)
			w.close('}')
		}
		w.close(']')
	}
	w.close('}')
}

func (w *jsonWriter) errorInfo(e *ErrorInfo) {
	w.open('{')
	w.strField("type", e.Type)
	w.strField("message", e.Message)
	w.strOmit("node", e.Node)
	w.key("permanent")
	w.b = strconv.AppendBool(w.b, e.Permanent)
	w.close('}')
}

func (w *jsonWriter) resumeMark(r *ResumeMark) {
	w.open('{')
	w.strField("type", r.Type)
	w.strOmit("node", r.Node)
	w.strOmit("key", r.Key)
	w.strField("at", string(r.At))
	w.close('}')
}

func (w *jsonWriter) timeline(entries []TimelineEntry) {
	w.open('[')
	for i := range entries {
		t := &entries[i]
		w.next()
		w.open('{')
		w.intField("seq", int64(t.Seq))
		w.strField("time", string(t.Time))
		w.strOmit("node", t.Node)
		w.strField("event", t.Event)
		if t.Millis != 0 {
			w.intField("ms", t.Millis)
		}
		w.strOmit("detail", t.Detail)
		w.strOmit("why", t.Why)
		w.close('}')
	}
	w.close(']')
}

// writeMap writes m as encoding/json writes a map: null when nil, its keys in order, each
// value by value.
func writeMap[V any](w *jsonWriter, m map[string]V, value func(V)) {
	if m == nil {
		w.null()
		return
	}
	w.open('{')
	var scratch [8]string
	for _, k := range sortedKeys(m, &scratch) {
		w.mapKey(k)
		value(m[k])
	}
	w.close('}')
}

func (w *jsonWriter) intMap(m map[string]int) {
	writeMap(w, m, func(n int) { w.int(int64(n)) })
}

// object writes a map of decoded JSON (nil is null, as encoding/json writes it).
func (w *jsonWriter) object(m map[string]any, depth int) {
	if m == nil {
		w.null()
		return
	}
	if depth > maxDepth {
		w.fallback = true
		return
	}
	w.open('{')
	var scratch [8]string
	for _, k := range sortedKeys(m, &scratch) {
		w.mapKey(k)
		w.value(m[k], depth+1)
		if w.fallback {
			return
		}
	}
	w.close('}')
}

// value writes a value of the types JSON decodes to; any other type is encoding/json's.
func (w *jsonWriter) value(v any, depth int) {
	switch x := v.(type) {
	case nil:
		w.null()
	case string:
		w.str(x)
	case bool:
		w.b = strconv.AppendBool(w.b, x)
	case float64:
		w.float(x)
	case map[string]any:
		w.object(x, depth)
	case []any:
		if x == nil {
			w.null()
			return
		}
		if depth > maxDepth {
			w.fallback = true
			return
		}
		w.open('[')
		for _, e := range x {
			w.next()
			w.value(e, depth+1)
			if w.fallback {
				return
			}
		}
		w.close(']')
	default:
		b, err := json.Marshal(x)
		if err != nil {
			w.fallback = true // the whole state's json.Marshal reports it, in its words
			return
		}
		w.b = append(w.b, b...)
	}
}

// float writes f as encoding/json does: like ES6's number to string, shortest digits, an
// exponent only below 1e-6 and from 1e21, written without padding.
func (w *jsonWriter) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		w.fallback = true
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
	if format == 'e' {
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1] // e-07 → e-7
			w.b = w.b[:n-1]
		}
	}
}

// sortedKeys returns m's keys in order; a map of up to 8 keys (most of a state's) sorts them
// in scratch, which stays on the caller's stack.
func sortedKeys[V any](m map[string]V, scratch *[8]string) []string {
	keys := scratch[:0]
	if len(m) > len(scratch) {
		keys = make([]string, 0, len(m))
	}
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way json.Marshal does: <, > and & escaped for
// HTML, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped for JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
