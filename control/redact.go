package control

import (
	"regexp"
	"strings"

	"plaita/store/keys"
)

// Redactor hides the names of storage keys in what the console answers its callers: a
// refusal or an error written for an operator at a terminal may name the key it is about
// (`redis-cli DEL …`), but a tenant's caller over HTTP must learn nothing of the key space — its
// root, the other tenants' prefixes, the queue's name.
type Redactor struct{ re *regexp.Regexp }

// RedactedKey is what stands in for a key's name.
const RedactedKey = "<storage key>"

// NewRedactor hides the keys under root ("" = keys.DefaultRoot) and the names given (a queue or
// dead-letter stream named outside the root).
func NewRedactor(root string, names ...string) Redactor {
	if root == "" {
		root = keys.DefaultRoot
	}
	// A key runs to the next space, quote, bracket or separator; one in a hash tag keeps its
	// braces inside the match.
	alts := []string{`\{?` + regexp.QuoteMeta(root) + `:[^\s"'(),;]+`}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && !strings.HasPrefix(n, root+":") {
			alts = append(alts, `\{?`+regexp.QuoteMeta(n)+`(?::[^\s"'(),;]*)?\}?`)
		}
	}
	return Redactor{re: regexp.MustCompile(strings.Join(alts, "|"))}
}

// String is s with every key name replaced by RedactedKey.
func (r Redactor) String(s string) string {
	if r.re == nil || s == "" {
		return s
	}
	return r.re.ReplaceAllLiteralString(s, RedactedKey)
}

// Value redacts the strings of a decoded JSON-like value (maps, slices, strings), in place
// where it can, and returns it.
func (r Redactor) Value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []string:
		for i := range x {
			x[i] = r.String(x[i])
		}
	case []any:
		for i := range x {
			x[i] = r.Value(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = r.Value(x[k])
		}
	}
	return v
}

// Redactor is the plane's: its key root and its task queue.
func (p *Plane) Redactor() Redactor {
	var names []string
	if p.d.Producer != nil {
		names = append(names, p.d.Producer.Stream())
	}
	return NewRedactor(p.d.Root, names...)
}
