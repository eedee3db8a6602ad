package sqlite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"plaita/store"
)

// Every list is paged by an opaque cursor (keyset pagination: the sort key of the last row of
// the page, never an offset) with a bounded limit.

// Page limits of every list but the audit's (which has its own, ListAudit): the one policy
// of every list (store.DefaultListLimit, store.MaxListLimit).
const (
	DefaultLimit = store.DefaultListLimit
	MaxLimit     = store.MaxListLimit
)

// ListOptions pages a list.
type ListOptions struct {
	// Cursor is "" for the first page, else the Next of the page before. A cursor belongs to
	// one list: another list's, or a forged one, is ErrBadCursor.
	Cursor string
	// Limit is the page size: 0 is DefaultLimit, above MaxLimit is MaxLimit, negative is
	// store.ErrInvalid.
	Limit int
}

// Page is one page of a list.
type Page[T any] struct {
	Items []T `json:"items"`
	// Next is the cursor of the next page ("" on the last one).
	Next string `json:"next,omitempty"`
	// Limit is the page size that was applied.
	Limit int `json:"limit"`
}

// pageLimit applies the limit rule of ListOptions.
func pageLimit(n, def, maxLimit int) (int, error) {
	switch {
	case n < 0:
		return 0, invalid("limit %d: use 1 to %d (0: %d)", n, maxLimit, def)
	case n == 0:
		return def, nil
	case n > maxLimit:
		return maxLimit, nil
	}
	return n, nil
}

// Bounds of a cursor: a page key is a few short values.
const (
	maxCursorLen = 2048
	maxCursorKey = 512
)

// cursor is what a cursor string carries: the list it belongs to and the sort key after which
// the next page starts.
type cursor struct {
	List string   `json:"l"`
	Key  []string `json:"k"`
}

// encodeCursor is the cursor of list after key.
func encodeCursor(list string, key ...string) string {
	b, err := json.Marshal(cursor{List: list, Key: key})
	if err != nil { // strings always encode
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of list with n key values: "" is none (nil), anything that is
// not a cursor this package wrote for that list is ErrBadCursor.
func decodeCursor(list, s string, n int) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxCursorLen {
		return nil, fmt.Errorf("%w: longer than %d characters", ErrBadCursor, maxCursorLen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c cursor
	if err := dec.Decode(&c); err != nil || dec.More() {
		return nil, fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	if c.List != list {
		return nil, fmt.Errorf("%w: a cursor of another list", ErrBadCursor)
	}
	if len(c.Key) != n {
		return nil, fmt.Errorf("%w: %d key values, want %d", ErrBadCursor, len(c.Key), n)
	}
	for _, k := range c.Key {
		if len(k) > maxCursorKey || !utf8.ValidString(k) {
			return nil, fmt.Errorf("%w: a key value is too long or not UTF-8", ErrBadCursor)
		}
	}
	return c.Key, nil
}

// page cuts rows fetched with LIMIT limit+1 into a page: when there is one row more than the
// limit, Next is the cursor after the last row kept.
func page[T any](rows []T, limit int, list string, key func(T) []string) Page[T] {
	p := Page[T]{Items: rows, Limit: limit}
	if p.Items == nil {
		p.Items = []T{}
	}
	if len(rows) > limit {
		p.Items = rows[:limit]
		p.Next = encodeCursor(list, key(rows[limit-1])...)
	}
	return p
}
