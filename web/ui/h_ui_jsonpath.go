package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// pathFrame is an object or array being read by pathLines.
type pathFrame struct {
	path   string
	array  bool
	index  int    // array: the element about to be read
	key    string // object: the key of the value about to be read
	hasKey bool
}

// child is the path of the value about to be read in f.
func (f *pathFrame) child() string {
	switch {
	case f.array:
		return fmt.Sprintf("%s[%d]", f.path, f.index)
	case f.path == "":
		return f.key
	}
	return f.path + "." + f.key
}

// done moves f past the value just read.
func (f *pathFrame) done() {
	if f.array {
		f.index++
	} else {
		f.hasKey = false
	}
}

// pathLines maps every JSON path in src to the line its key (or, in an array, its value) is
// on, in the path syntax of the flow validator's problems: id, nodes[2], nodes[2].params.url.
// It reads what it can: text that stops being JSON ends the map where it stops.
func pathLines(src []byte) map[string]int {
	out := map[string]int{"": 1}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var stack []*pathFrame
	pop := func() {
		stack = stack[:len(stack)-1]
		if len(stack) > 0 {
			stack[len(stack)-1].done()
		}
	}
	for {
		start := skipJSONSpace(src, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var top *pathFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		path := ""
		switch {
		case top != nil && (tok == json.Delim('}') || tok == json.Delim(']')):
			pop()
			continue
		case top != nil && !top.array && !top.hasKey:
			top.key, top.hasKey = fmt.Sprint(tok), true
			out[top.child()] = lineAt(src, start)
			continue
		case top != nil:
			path = top.child()
			if top.array {
				out[path] = lineAt(src, start)
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &pathFrame{path: path})
		case json.Delim('['):
			stack = append(stack, &pathFrame{path: path, array: true})
		default:
			if top != nil {
				top.done()
			}
		}
	}
}

// skipJSONSpace is the offset of the next token at or after i: past white space and the
// separators the decoder consumes between tokens.
func skipJSONSpace(src []byte, i int) int {
	for i < len(src) {
		switch src[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
		default:
			return i
		}
	}
	return i
}
