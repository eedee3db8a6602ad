package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind names the parser a variable uses. Treating these as interchangeable is how "0 is off",
// "true is on" and "an empty name is the default" mistakes arise (README "Configuration"); each
// variable names exactly one.
type Kind string

const (
	KindExact01    Kind = "exact01"    // byte-exact "1"/"0"
	KindStrip1     Kind = "strip1"     // strings.TrimSpace(v) == "1"
	KindStrictBool Kind = "strictbool" // 1/true/yes/on vs 0/false/no/off, anything else invalid
	KindLooseBool  Kind = "loosebool"  // 0/false/no/off is false, anything else true
	KindIdentity   Kind = "identity"   // a name or address that must not be empty when set
	KindString     Kind = "string"     // free text; blank handled per variable
	KindInt        Kind = "int"
	KindFloat      Kind = "float"
	KindEnum       Kind = "enum"
	KindList       Kind = "list"
)

// input is what a parser sees: the raw text, whether the variable was set at all, and whether
// a command-line flag set it (its hints then say to omit the flag, not to unset a variable).
type input struct {
	raw  string
	set  bool
	flag bool
}

// useDefault is the hint of a rejected value: how to get the default (def as printed; "" to
// name none). A flag's value is given up by omitting the flag, an environment variable's by
// unsetting it.
func (in input) useDefault(def string) string {
	how := "unset it"
	if in.flag {
		how = "omit the flag"
	}
	if def == "" {
		return how + " to use the default"
	}
	return how + " to use the default " + def
}

// outcome is one parse result. reject non-empty means strict preflight refuses the value; in
// non-strict mode the same outcome is used as a warning and value stays the safe fallback.
type outcome struct {
	value  any
	warn   string
	reject string
	hint   string
}

// fixMode says what a numeric class of input (zero, negative, invalid …) turns into.
type fixMode int

const (
	fixKeep    fixMode = iota // keep the parsed number
	fixDefault                // use the variable's default
	fixTo                     // use a fixed number (a clamp, or "off")
)

// fix is one cell of the 0/negative/invalid matrix: the value used, whether it is logged as a
// WARNING, and whether strict preflight rejects it instead.
type fix struct {
	mode   fixMode
	to     float64
	warn   bool
	reject bool
}

func keep() fix        { return fix{mode: fixKeep} }
func dflt() fix        { return fix{mode: fixDefault} }
func to(v float64) fix { return fix{mode: fixTo, to: v} }
func (f fix) W() fix   { f.warn = true; return f }
func (f fix) R() fix   { f.reject = true; return f }

func (f fix) describe(def string) string {
	var s string
	switch f.mode {
	case fixKeep:
		s = "kept"
	case fixDefault:
		s = "→ " + def
	case fixTo:
		s = "→ " + strconv.FormatFloat(f.to, 'g', -1, 64)
	}
	if f.warn || f.reject {
		s += " + WARNING"
	}
	if f.reject {
		s += "; strict preflight rejects"
	}
	return s
}

// numRule is the numeric matrix of one variable. Every class of input has its own cell because
// "0 is off" holds for some variables and not for others.
type numRule struct {
	def     float64
	isFloat bool
	zero    fix
	neg     fix
	bad     fix     // not a number, empty, NaN, ±Inf, a fraction for an integer
	max     float64 // >0: values above it are treated as bad
	maxText string  // how the limit reads in an error, e.g. "65535"
	want    string  // what is allowed, e.g. "a positive integer"
}

// maxExactInt is the largest integer a float64 holds exactly, 2^53.
const maxExactInt = 1 << 53

func (r numRule) format(v float64) any {
	if r.isFloat {
		return v
	}
	return int(v)
}

func (r numRule) apply(f fix, v float64, in input, why string) outcome {
	out := outcome{}
	switch f.mode {
	case fixKeep:
		out.value = r.format(v)
	case fixDefault:
		out.value = r.format(r.def)
	case fixTo:
		out.value = r.format(f.to)
	}
	raw := in.raw
	msg := fmt.Sprintf("%q %s; %s", raw, why, "using "+fmtValue(out.value))
	if f.reject {
		out.reject = fmt.Sprintf("%q %s: must be %s", raw, why, r.want)
		out.warn = msg
		out.hint = in.useDefault(fmtValue(r.format(r.def)))
	} else if f.warn {
		out.warn = msg
	}
	return out
}

func (r numRule) parse(in input) outcome {
	if !in.set {
		return outcome{value: r.format(r.def)}
	}
	s := strings.TrimSpace(in.raw)
	if s == "" {
		return r.apply(r.bad, 0, in, "is empty")
	}
	var v float64
	if r.isFloat {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return r.apply(r.bad, 0, in, "is not a number")
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return r.apply(r.bad, 0, in, "is not a finite number")
		}
		v = f
	} else {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return r.apply(r.bad, 0, in, "is not an integer")
		}
		// The matrix works on float64, which holds integers exactly only up to 2^53; beyond
		// that the value would change (and 2^63-1 would wrap to a negative int).
		if n > maxExactInt || n < -maxExactInt {
			return r.apply(r.bad, 0, in, "is out of range")
		}
		v = float64(n)
	}
	switch {
	case v == 0:
		return r.apply(r.zero, v, in, "is zero")
	case v < 0:
		return r.apply(r.neg, v, in, "is negative")
	case r.max > 0 && v > r.max:
		return r.apply(r.bad, v, in, "is above "+r.maxText)
	}
	return outcome{value: r.format(v)}
}

// boolRule covers exact01, strip1, strictbool and loosebool.
type boolRule struct {
	kind Kind
	def  bool
	bad  fix // strictbool only: mode fixTo with to 0/1 gives the fail-closed value
}

var (
	trueWords  = map[string]bool{"1": true, "true": true, "yes": true, "on": true}
	falseWords = map[string]bool{"0": true, "false": true, "no": true, "off": true}
)

func (r boolRule) parse(in input) outcome {
	if !in.set {
		return outcome{value: r.def}
	}
	switch r.kind {
	case KindExact01:
		switch in.raw {
		case "1":
			return outcome{value: true}
		case "0":
			return outcome{value: false}
		}
		// Only the exact byte decides; anything else keeps the default. Say so, because
		// " 0 " or "true" looking like it worked is how this trap bites.
		return outcome{value: r.def, warn: fmt.Sprintf("%q is not exactly 1 or 0; this variable compares bytes, so it stays %s", in.raw, onOff(r.def))}
	case KindStrip1:
		t := strings.TrimSpace(in.raw)
		if t == "1" {
			return outcome{value: true}
		}
		if t == "" || t == "0" {
			return outcome{value: false}
		}
		return outcome{value: false, warn: fmt.Sprintf("%q does not switch it on: only 1 does (surrounding spaces allowed)", in.raw)}
	case KindLooseBool:
		t := strings.ToLower(strings.TrimSpace(in.raw))
		if falseWords[t] {
			return outcome{value: false}
		}
		if trueWords[t] {
			return outcome{value: true}
		}
		return outcome{value: true, warn: fmt.Sprintf("%q is not a boolean word; any value but 0/false/no/off reads as true", in.raw)}
	}
	// KindStrictBool
	t := strings.ToLower(strings.TrimSpace(in.raw))
	if trueWords[t] {
		return outcome{value: true}
	}
	if falseWords[t] {
		return outcome{value: false}
	}
	used := r.bad.to != 0
	out := outcome{value: used, warn: fmt.Sprintf("%q is not a boolean; using %t", in.raw, used)}
	if r.bad.reject {
		out.reject = fmt.Sprintf("%q is not a boolean: use one of 1, true, yes, on, 0, false, no, off", in.raw)
		out.hint = in.useDefault("")
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// stringRule covers identity and free-text variables.
type stringRule struct {
	identity bool // empty when set is a configuration error
	noTrim   bool // the value is used byte for byte
	blank    fix  // free text only: what a blank value does (keep/default, warn)
}

func (r stringRule) parse(in input, def string) outcome {
	if !in.set {
		return outcome{value: def}
	}
	v := in.raw
	if !r.noTrim {
		v = strings.TrimSpace(v)
	}
	if v == "" {
		if r.identity {
			return outcome{
				value:  def,
				warn:   fmt.Sprintf("empty value; using the default %q", def),
				reject: "empty value is not allowed",
				hint:   in.useDefault(strconv.Quote(def)),
			}
		}
		if r.blank.mode == fixKeep {
			return outcome{value: ""}
		}
		out := outcome{value: def}
		if r.blank.warn {
			out.warn = fmt.Sprintf("blank value; using the default %q", def)
		}
		return out
	}
	return outcome{value: v}
}

// enumRule maps trimmed, lower-cased words to a canonical value.
type enumRule struct {
	def     string
	allowed []string          // canonical values, in the order shown to users
	alias   map[string]string // extra spellings
	bad     fix               // fixDefault or fixTo-less: value used is badTo
	badTo   string
}

func (r enumRule) parse(in input) outcome {
	if !in.set {
		return outcome{value: r.def}
	}
	t := strings.ToLower(strings.TrimSpace(in.raw))
	for _, a := range r.allowed {
		if t == a {
			return outcome{value: a}
		}
	}
	if c, ok := r.alias[t]; ok {
		return outcome{value: c}
	}
	used := r.def
	if r.badTo != "" {
		used = r.badTo
	}
	out := outcome{value: used, warn: fmt.Sprintf("%q is not one of %s; using %q", in.raw, strings.Join(r.allowed, ", "), used)}
	if r.bad.reject {
		out.reject = fmt.Sprintf("%q is not one of %s", in.raw, strings.Join(r.allowed, ", "))
		out.hint = in.useDefault(strconv.Quote(r.def))
	}
	return out
}

// listRule splits a value into items; allowed (when set) restricts the items.
type listRule struct {
	seps    string // separator characters
	ws      bool   // whitespace separates items too
	allowed []string
	alias   map[string]string
}

func (r listRule) split(raw string) []string {
	fields := strings.FieldsFunc(raw, func(c rune) bool {
		if strings.ContainsRune(r.seps, c) {
			return true
		}
		return r.ws && (c == ' ' || c == '\t' || c == '\n' || c == '\r')
	})
	out := []string{}
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (r listRule) parse(in input, def []string) outcome {
	if !in.set {
		return outcome{value: append([]string{}, def...)}
	}
	items := r.split(in.raw)
	if r.allowed == nil {
		return outcome{value: items}
	}
	var good, bad []string
	for _, it := range items {
		w := strings.ToLower(it)
		if c, ok := r.alias[w]; ok {
			w = c
		}
		if slices.Contains(r.allowed, w) {
			if !slices.Contains(good, w) {
				good = append(good, w)
			}
		} else {
			bad = append(bad, it)
		}
	}
	if len(bad) == 0 {
		return outcome{value: good}
	}
	return outcome{
		value:  good,
		warn:   fmt.Sprintf("unknown item(s) %s dropped; allowed: %s", quoteAll(bad), strings.Join(r.allowed, ", ")),
		reject: fmt.Sprintf("unknown item(s) %s; allowed: %s", quoteAll(bad), strings.Join(r.allowed, ", ")),
		hint:   "remove the unknown items",
	}
}

func quoteAll(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// fmtValue renders an effective value the way doctor and the logs show it.
func fmtValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []string:
		return "[" + strings.Join(x, ",") + "]"
	default:
		return fmt.Sprint(x)
	}
}
