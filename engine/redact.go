package engine

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// Secret is a credential a node opened (Call.Credential), for the Redactor.
type Secret struct{ Name, Value string }

// Redactor replaces opened credentials in what a node returns: each occurrence of a value —
// as it is, URL-escaped or in base64 — becomes "[credential NAME]", so that a server that
// echoes a header, or code that prints what it was given, leaves no trace of it in the
// execution's state or its errors.
type Redactor []Secret

// minRedacted is the shortest value redacted: a shorter one would blank out common text.
const minRedacted = 4

// Text redacts a string.
func (r Redactor) Text(t string) string {
	for _, c := range r {
		if len(c.Value) < minRedacted {
			continue
		}
		mark := "[credential " + c.Name + "]"
		for _, form := range []string{c.Value, url.QueryEscape(c.Value), url.PathEscape(c.Value),
			base64.StdEncoding.EncodeToString([]byte(c.Value)), base64.RawURLEncoding.EncodeToString([]byte(c.Value))} {
			t = strings.ReplaceAll(t, form, mark)
		}
	}
	return t
}

// Value redacts a decoded JSON value (strings in place, object keys too).
func (r Redactor) Value(v any) any {
	switch x := v.(type) {
	case string:
		return r.Text(x)
	case []any:
		for i := range x {
			x[i] = r.Value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.Text(k)] = r.Value(e)
		}
		return out
	case []string:
		for i := range x {
			x[i] = r.Text(x[i])
		}
		return x
	}
	return v
}

// Outcome redacts an outcome's output and an error's message (the error keeps its kind:
// errors.Is and Permanent see through it).
func (r Redactor) Outcome(o Outcome, err error) (Outcome, error) {
	if len(r) == 0 {
		return o, err
	}
	if o.Output != nil {
		o.Output = r.Value(o.Output)
	}
	if err != nil {
		if t := r.Text(err.Error()); t != err.Error() {
			err = &redactedError{text: t, err: err}
		}
	}
	return o, err
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
