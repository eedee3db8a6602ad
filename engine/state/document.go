package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxDocumentDepth bounds how deeply objects and arrays nest in every document plaita takes from
// outside — event data, start input, resume data, flow definitions — and in every node result.
// An execution state holds such documents a few levels down (context → node → result), so a
// state made of them always stays far inside what its decoder reads back (encoding/json stops
// at 10,000 levels): an execution can never be saved in a shape that can no longer be loaded.
// `{}` and `[]` are one level, a scalar none.
const MaxDocumentDepth = 64

var (
	// ErrNotJSON: the bytes are not one JSON value.
	ErrNotJSON = errors.New("not valid JSON")
	// ErrTooDeep: objects and arrays nest deeper than MaxDocumentDepth.
	ErrTooDeep = errors.New("JSON nested too deeply")
	// ErrInexactNumber: a number that a 64-bit float — what every expression and every stored
	// state reads numbers as — cannot hold: out of its range, or with more digits than it keeps
	// (integers beyond ±2^53 such as 9007199254740993). Kept, it would silently change value.
	ErrInexactNumber = errors.New("JSON number cannot be kept exactly")
)

// DocumentError is a document refused by CheckDocument or CheckDepth: what is wrong and where.
type DocumentError struct {
	Err    error  // ErrNotJSON, ErrTooDeep or ErrInexactNumber
	Path   string // where, as a JSON path from the document's root ("" = the root itself)
	Detail string
}

func (e *DocumentError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Detail)
	}
	return fmt.Sprintf("%v at %s: %s", e.Err, e.Path, e.Detail)
}

func (e *DocumentError) Unwrap() error { return e.Err }

// CheckDocument checks a document from outside: one JSON value, nested at most
// MaxDocumentDepth levels, with numbers a float64 keeps exactly (a *DocumentError otherwise).
func CheckDocument(b []byte) error { return checkDocument(b, true) }

// CheckDepth is CheckDocument without the number rule: for flow definitions (their numbers are
// parameters, each range-checked where it is read) and values plaita encoded itself.
func CheckDepth(b []byte) error { return checkDocument(b, false) }

func checkDocument(b []byte, numbers bool) error {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		detail := "not one JSON value"
		if err != nil {
			detail = err.Error()
		}
		return &DocumentError{Err: ErrNotJSON, Detail: detail}
	}
	s := docScan{b: b, numbers: numbers}
	return s.run()
}

// docFrame is one open object or array while scanning.
type docFrame struct {
	object bool
	key    string // the member being read (objects)
	index  int    // the element being read (arrays)
}

// docScan walks bytes that json.Valid accepted, keeping the path only to name what it refuses.
type docScan struct {
	b       []byte
	numbers bool
	stack   []docFrame
}

func (s *docScan) run() error {
	b := s.b
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			if len(s.stack) == MaxDocumentDepth {
				return &DocumentError{Err: ErrTooDeep, Path: s.path(),
					Detail: fmt.Sprintf("objects and arrays nest deeper than %d levels", MaxDocumentDepth)}
			}
			s.stack = append(s.stack, docFrame{object: c == '{'})
		case '}', ']':
			s.stack = s.stack[:len(s.stack)-1]
		case ',':
			if top := s.top(); top != nil && !top.object {
				top.index++
			}
		case '"':
			end := stringEnd(b, i)
			if top := s.top(); top != nil && top.object && nextNonSpace(b, end+1) == ':' {
				top.key = unquote(b[i : end+1])
			}
			i = end
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i + 1
			for j < len(b) && strings.IndexByte("+-0123456789.eE", b[j]) >= 0 {
				j++
			}
			if s.numbers {
				if detail, ok := ExactNumber(string(b[i:j])); !ok {
					return &DocumentError{Err: ErrInexactNumber, Path: s.path(), Detail: detail}
				}
			}
			i = j - 1
		}
	}
	return nil
}

func (s *docScan) top() *docFrame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// path names the value being read: a.b[2]["odd key"].
func (s *docScan) path() string {
	var sb strings.Builder
	for _, f := range s.stack {
		switch {
		case !f.object:
			fmt.Fprintf(&sb, "[%d]", f.index)
		case identifier(f.key):
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(f.key)
		default:
			fmt.Fprintf(&sb, "[%s]", strconv.Quote(f.key))
		}
	}
	return sb.String()
}

func identifier(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// stringEnd is the index of the quote that closes the string opened at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(b) - 1
}

func nextNonSpace(b []byte, i int) byte {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
		default:
			return b[i]
		}
	}
	return 0
}

func unquote(q []byte) string {
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(q)
	}
	return s
}

// ExactNumber reports whether the JSON number literal lit reads back unchanged from the float64
// it is decoded into: its value is that of the float's shortest decimal form. 0.1 is exact in
// this sense (it is written back as 0.1); 9007199254740993 and 1e400 are not. When it is not,
// detail says why.
func ExactNumber(lit string) (detail string, ok bool) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return fmt.Sprintf("%s is out of the range of a 64-bit float (about ±1.8e308): send it as a string", clipLiteral(lit)), false
	}
	back := strconv.FormatFloat(f, 'g', -1, 64)
	if sameDecimal(lit, back) {
		return "", true
	}
	return fmt.Sprintf("%s has more digits than a 64-bit float keeps (it would read as %s): send it as a string", clipLiteral(lit), back), false
}

func clipLiteral(lit string) string {
	if len(lit) > 40 {
		return lit[:37] + "..."
	}
	return lit
}

// decimal is a number literal in a canonical form: value = ±0.digits × 10^exp, digits with no
// leading or trailing zeros ("" for zero, whose exp is 0).
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// sameDecimal compares two JSON number literals by value, digit for digit (no float or big
// arithmetic: an exponent of a billion costs nothing).
func sameDecimal(a, b string) bool { return canonical(a) == canonical(b) }

func canonical(lit string) decimal {
	var d decimal
	if strings.HasPrefix(lit, "-") {
		d.neg, lit = true, lit[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	point := int64(len(intPart))
	trimmed := strings.TrimLeft(digits, "0")
	point -= int64(len(digits) - len(trimmed))
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{neg: d.neg}
	}
	var e int64
	if hasExp {
		e = saturatingExp(expPart)
	}
	d.exp = point + e
	return d
}

// saturatingExp parses an exponent, holding it at ±2^40 — far past anything a float64 reaches,
// so that a saturated exponent still compares unequal to every float's.
func saturatingExp(s string) int64 {
	const limit = int64(1) << 40
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	var e int64
	for _, c := range s {
		e = e*10 + int64(c-'0')
		if e > limit {
			e = limit
			break
		}
	}
	if neg {
		return -e
	}
	return e
}
