package state

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

func nested(levels int, inner string) string {
	return strings.Repeat(`{"a":`, levels) + inner + strings.Repeat("}", levels)
}

func TestCheckDocument(t *testing.T) {
	cases := []struct {
		doc        string
		want       error
		path       string
		numbersOff bool // CheckDepth accepts it
	}{
		{doc: `{}`},
		{doc: `1`},
		{doc: `"x"`},
		{doc: nested(MaxDocumentDepth, `1`)},
		{doc: nested(MaxDocumentDepth-1, `[1]`)},
		{doc: nested(MaxDocumentDepth+1, `1`), want: ErrTooDeep, path: strings.TrimSuffix(strings.Repeat("a.", MaxDocumentDepth), ".")},
		{doc: strings.Repeat("[", MaxDocumentDepth+1) + strings.Repeat("]", MaxDocumentDepth+1), want: ErrTooDeep,
			path: strings.Repeat("[0]", MaxDocumentDepth)},
		{doc: nested(9999, `1`), want: ErrTooDeep},
		{doc: `{"k":"u","n":9007199254740993}`, want: ErrInexactNumber, path: "n", numbersOff: true},
		{doc: `{"k":[1,2,{"odd key":1e400}]}`, want: ErrInexactNumber, path: `k[2]["odd key"]`, numbersOff: true},
		{doc: `[0.1000000000000000000001]`, want: ErrInexactNumber, path: "[0]", numbersOff: true},
		{doc: `{"n":9007199254740992,"m":0.1,"x":1.0,"y":1e2,"z":-0,"w":0.30000000000000004,"v":1e-300,"u":18014398509481984}`},
		{doc: `{"s":"9007199254740993 as a string is kept","esc":"a\"}{[","k\"":1}`},
		{doc: `{"a":1`, want: ErrNotJSON},
		{doc: `{} {}`, want: ErrNotJSON},
		{doc: ``, want: ErrNotJSON},
	}
	for _, c := range cases {
		name := c.doc
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			err := CheckDocument([]byte(c.doc))
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("CheckDocument(%.60s) = %v, want %v", c.doc, err, c.want)
			}
			var de *DocumentError
			if c.want != nil && c.want != ErrNotJSON {
				if !errors.As(err, &de) || de.Path != c.path && c.path != "" {
					t.Fatalf("CheckDocument(%.60s) path = %q (%v), want %q", c.doc, de.Path, err, c.path)
				}
			}
			derr := CheckDepth([]byte(c.doc))
			if c.numbersOff && derr != nil {
				t.Fatalf("CheckDepth(%.60s) = %v, want nil (numbers are not its business)", c.doc, derr)
			}
			if !c.numbersOff && !errors.Is(derr, c.want) {
				t.Fatalf("CheckDepth(%.60s) = %v, want %v", c.doc, derr, c.want)
			}
		})
	}
}

func TestExactNumber(t *testing.T) {
	for lit, want := range map[string]bool{
		"0": true, "-0": true, "0.0": true, "1": true, "-1.5": true, "0.1": true, "1e2": true, "1E+2": true,
		"100e-2": true, "9007199254740992": true, "-9007199254740992": true, "9007199254740993": false,
		"9223372036854775807": false, "1e18": true, "1e400": false, "-1e400": false, "1e-400": false,
		"0e999999999999999999999": true, "1e-99999999999999999999": false, "123456789012345678": false,
		"0.30000000000000004": true, "2.5e-324": false, "5e-324": true,
	} {
		if detail, ok := ExactNumber(lit); ok != want {
			t.Errorf("ExactNumber(%s) = %v (%s), want %v", lit, ok, detail, want)
		}
	}
}

// FuzzExactNumber holds the digit-by-digit comparison to exact rational arithmetic.
func FuzzExactNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "9007199254740993", "1e308", "1e309", "0.1", "123.456e-7", "5e-324", "2e-324"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if CheckDepth([]byte(lit)) != nil || !strings.ContainsAny(lit[:1], "-0123456789") {
			return // not a JSON number
		}
		_, exp, _ := strings.Cut(strings.ToLower(lit), "e")
		if e, err := strconv.Atoi(exp); exp != "" && (err != nil || e > 400 || e < -400) {
			return // big.Rat would take too long; saturation covers these
		}
		_, got := ExactNumber(lit)
		fl, err := strconv.ParseFloat(lit, 64)
		want := err == nil
		if want {
			a, ok1 := new(big.Rat).SetString(lit)
			b, ok2 := new(big.Rat).SetString(strconv.FormatFloat(fl, 'g', -1, 64))
			want = ok1 && ok2 && a.Cmp(b) == 0
		}
		if got != want {
			t.Fatalf("ExactNumber(%s) = %v, exact arithmetic says %v", lit, got, want)
		}
	})
}

// FuzzCheckDocument: whatever the bytes, the check never panics, refuses what encoding/json
// refuses, and what it accepts nests no deeper than the bound.
func FuzzCheckDocument(f *testing.F) {
	for _, s := range []string{`{}`, `[[[[1]]]]`, nested(70, `1`), `{"a":"\"}"}`, `[1,2,{"b":[3e5]}]`, `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckDocument(b)
		var de *DocumentError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("CheckDocument: %v is not a *DocumentError", err)
		}
		if err == nil {
			depth, max := 0, 0
			inString := false
			for i := 0; i < len(b); i++ {
				switch c := b[i]; {
				case inString && c == '\\':
					i++
				case c == '"':
					inString = !inString
				case !inString && (c == '{' || c == '['):
					depth++
					max = maxInt(max, depth)
				case !inString && (c == '}' || c == ']'):
					depth--
				}
			}
			if max > MaxDocumentDepth {
				t.Fatalf("accepted a document %d levels deep", max)
			}
		}
	})
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
