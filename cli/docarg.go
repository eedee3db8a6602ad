package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"plaita/engine/state"
)

// Every document a command takes — --input, --data, a flow file — is read through readDoc:
// inline or from @path, never more than the bound of what it feeds (an event's data, an
// execution's state, a flow definition), and given up at SIGTERM (a FIFO or a device can block
// a read for ever). A document is then held to the rules every entry point applies
// (state.CheckDocument), so a command refuses what the worker would later choke on.

// docBound names what a document feeds and how large it may be.
type docBound struct {
	Max  int    // bytes
	What string // "the event data bound", "PLAITA_EXECUTION_STATE_MAX_BYTES" …
}

func (b docBound) tooLarge() error {
	return fmt.Errorf("too large: over the %d-byte bound (%s)", b.Max, b.What)
}

// errReadInterrupted: the read was given up because the command was told to stop.
var errReadInterrupted = errors.New("interrupted while reading")

// readFileBounded reads at most b.Max bytes of path; more is an error naming the bound. The
// read runs aside so that a cancelled ctx (SIGTERM, Ctrl-C) ends the command at once.
func readFileBounded(ctx context.Context, path string, b docBound) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			done <- result{err: unwrapPathError(err)}
			return
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, int64(b.Max)+1))
		done <- result{data, err}
	}()
	select {
	case <-ctx.Done():
		return nil, errReadInterrupted
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		if len(r.data) > b.Max {
			return nil, b.tooLarge()
		}
		return r.data, nil
	}
}

// readDoc reads the value of --flag: inline JSON, or @path. It returns the document as given
// (numbers keep every digit, key order stays as written), once checked to be one JSON value
// within the bound and the document rules. Every refusal is bad usage naming the flag.
func readDoc(ctx context.Context, name, flag, value string, b docBound) (json.RawMessage, error) {
	src, data := "--"+flag, []byte(value)
	if path, ok := strings.CutPrefix(value, "@"); ok {
		src = fmt.Sprintf("--%s %s", flag, value)
		var err error
		if data, err = readFileBounded(ctx, path, b); errors.Is(err, errReadInterrupted) {
			return nil, cliFail(name, "%s: %v", src, err)
		} else if err != nil {
			return nil, cliUsage(name, "%s: %v", src, err)
		}
	} else if len(data) > b.Max {
		return nil, cliUsage(name, "%s: %v", src, b.tooLarge())
	}
	if err := checkJSONValue(data, !strings.HasPrefix(value, "@")); err != nil {
		return nil, cliUsage(name, "%s: %v", src, err)
	}
	if err := state.CheckDocument(data); err != nil {
		return nil, cliUsage(name, "%s: %v", src, err)
	}
	return json.RawMessage(bytes.TrimSpace(data)), nil
}

// checkJSONValue says what is wrong with data that is not exactly one JSON value: empty, a
// syntax error (with its line and column) or a second value after the first.
func checkJSONValue(data []byte, inline bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("empty; give a JSON value such as {} (or @path to read a file)")
		}
		return fmt.Errorf("not valid JSON: %s", jsonError(data, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		hint := ""
		if inline {
			hint = " (quote the whole document for the shell)"
		}
		return fmt.Errorf("not valid JSON: more than one value%s", hint)
	}
	return nil
}

// decodeDoc decodes a document readDoc accepted into the values the engine works with.
func decodeDoc(doc json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	return v, nil
}
