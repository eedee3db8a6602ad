package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"

	"plaita/control"
	"plaita/engine/state"
)

// The templates' functions: formatting only.

// previewBytes bounds a value's preview in a table; the whole value is fetched on demand.
const previewBytes = 160

func (u *uiServer) funcs() template.FuncMap {
	return template.FuncMap{
		"ts":         formatTime,
		"ago":        func(t time.Time) string { return u.ago(t) },
		"iso":        func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"dur":        func(d time.Duration) string { return control.RoundDuration(d) },
		"rel":        relative, // a running duration, as the ticking clock writes it
		"ms":         func(ms int64) string { return control.RoundDuration(time.Duration(ms) * time.Millisecond) },
		"preview":    preview,
		"pretty":     pretty,
		"prettyText": func(s string) string { return pretty([]byte(s)) },
		"size":       func(v any) int { b, _ := json.Marshal(v); return len(b) },
		"stamp":      func(s state.Timestamp) time.Time { return s.Time() },
		"deref":      func(t *time.Time) time.Time { return derefTime(t) },
		"lower":      strings.ToLower,
		"add":        func(a, b int) int { return a + b },
		"list":       func() []string { return statuses },
		// dict hands a row template the session beside its row: {{template "row" (dict $.S .)}}.
		"dict":   func(s *uiSession, v any) uiPage { return uiPage{S: s, Data: v} },
		"limits": func() []int { return []int{20, 50, 100, 200, 500} },
		// indexValue is an indexed value as a filter takes it (index[f]=v): a string without
		// its JSON quotes, anything else as it is kept.
		"indexValue": func(canonical string) string {
			var s string
			if json.Unmarshal([]byte(canonical), &s) == nil {
				return s
			}
			return canonical
		},
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// ago is a time relative to now, "3m ago" or "in 2h".
func (u *uiServer) ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := u.now().Sub(t)
	if d < 0 {
		return "in " + relative(-d)
	}
	return relative(d) + " ago"
}

// relative is a duration as every relative time of the pages reads, in the words app.js's
// ticking clock writes (fmt there), so a time reads the same before and after its first tick:
// "1124d 18h", "3h 5m", "4m 2s", "7s".
func relative(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	days, h, m, r := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, r)
	}
	return fmt.Sprintf("%ds", r)
}

// preview is v as compact JSON cut at previewBytes (on a rune boundary), with an ellipsis when
// cut.
func preview(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return previewJSON(b)
}

// previewJSON is preview of JSON text b.
func previewJSON(b []byte) string {
	if len(b) <= previewBytes {
		return unescapeHTML(string(b))
	}
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return unescapeHTML(string(b[:cut])) + " …"
}

// pretty is v (or JSON bytes) as indented JSON.
func pretty(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprintf("%v", v)
		}
		raw = b
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	// encoding/json wrote <, > and & as \u003c, \u003e, \u0026 (HTML-safe JSON) on the API's
	// side; the same JSON reads better as written (html/template escapes the page).
	return unescapeHTML(out.String())
}

// unescapeHTML turns the escapes \u003c, \u003e and \u0026 of JSON text back into <, > and
// &, reading escapes pairwise so that an escaped backslash followed by "u003c" stays as it is.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], `\u003c`):
			b.WriteByte('<')
		case strings.HasPrefix(s[i:], `\u003e`):
			b.WriteByte('>')
		case strings.HasPrefix(s[i:], `\u0026`):
			b.WriteByte('&')
		default:
			b.WriteString(s[i : i+2])
			i++
			continue
		}
		i += 5
	}
	return b.String()
}
