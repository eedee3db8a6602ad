package httpnode

import (
	"errors"
	"net/http"
	"slices"
	"strings"
)

// Bounds of the response headers. Go's transport lets 10 MiB of headers in by default, and the
// node used to keep every one of them in its result, whatever PLAITA_HTTP_MAX_RESPONSE_BYTES
// said about the body: a server could fill the execution state through its headers.
const (
	// DefaultMaxResponseHeaderBytes is the transport's MaxResponseHeaderBytes: a response
	// whose header block is longer is refused (ErrResponseHeadersTooLarge).
	DefaultMaxResponseHeaderBytes = 64 << 10
	// DefaultKeepHeaderFields bounds the header values kept in the result.
	DefaultKeepHeaderFields = 100
	// DefaultKeepHeaderBytes bounds the bytes of names and values kept in the result.
	DefaultKeepHeaderBytes = 16 << 10
)

// ErrResponseHeadersTooLarge: the response's header block is over HeaderLimits.MaxBytes.
var ErrResponseHeadersTooLarge = errors.New("response headers too large")

// HeaderLimits bound the response headers. A zero or negative field takes its default.
type HeaderLimits struct {
	// MaxBytes is set as MaxResponseHeaderBytes on every transport the node builds (for
	// HTTP/2, the header list size the client advertises): a response with more header bytes
	// fails, permanently. Default DefaultMaxResponseHeaderBytes.
	MaxBytes int64
	// KeepFields and KeepBytes bound what the result keeps of the headers that passed:
	// header values in name order (a name with several values counts once per value, its
	// length counted with each), up to KeepFields values and KeepBytes bytes; the first value
	// over either bound and everything after it are dropped, and the result says how many
	// (headers_truncated, headers_dropped). Defaults DefaultKeepHeaderFields and
	// DefaultKeepHeaderBytes.
	KeepFields int
	KeepBytes  int
}

func (l HeaderLimits) withDefaults() HeaderLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxResponseHeaderBytes
	}
	if l.KeepFields <= 0 {
		l.KeepFields = DefaultKeepHeaderFields
	}
	if l.KeepBytes <= 0 {
		l.KeepBytes = DefaultKeepHeaderBytes
	}
	return l
}

// WithHeaderLimits replaces the default header bounds (zero fields keep their defaults).
func WithHeaderLimits(l HeaderLimits) Option { return func(t *Type) { t.headers = l } }

// keptHeaders is the headers object of the result: a name with one value maps to the value, a
// name with several to the list of those kept. dropped counts the values left out. Names are
// taken in sorted order so that the same response keeps the same headers on every run.
func keptHeaders(h http.Header, l HeaderLimits) (kept map[string]any, dropped int) {
	kept = make(map[string]any, min(len(h), l.KeepFields))
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	fields, size, full := 0, 0, false
	for _, k := range names {
		vs := h[k]
		var list []any
		for _, v := range vs {
			if full || fields >= l.KeepFields || size+len(k)+len(v) > l.KeepBytes {
				full = true
				dropped++
				continue
			}
			fields, size = fields+1, size+len(k)+len(v)
			list = append(list, v)
		}
		switch {
		case len(list) == 0:
		case len(vs) == 1:
			kept[k] = list[0]
		default:
			kept[k] = list
		}
	}
	return kept, dropped
}

// headersTooLarge reports whether err is the transport refusing a response over
// MaxResponseHeaderBytes (HTTP/1) or over the advertised header list size (HTTP/2). Neither
// error is exported by net/http: their texts are matched, and the tests pin them.
func headersTooLarge(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "server response headers exceeded") ||
		strings.Contains(s, "response header list larger than advertised limit")
}
