package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"plaita/engine/state"
)

// A state that does not decode (written by a build without today's bounds, edited by hand, cut
// short) must not make its execution unreachable: Load returns the bytes it found in a
// *CorruptStateError, an operator can look at them (`plaita execution show`), end the
// execution (`execution cancel` replaces them with a cancelled state through ReplaceCorrupt)
// or delete it.

// CorruptStateError is an ErrStateCorrupt with the bytes found under the state key (nil when the
// key holds no string).
type CorruptStateError struct {
	ID  string
	Raw []byte
	Err error // matches ErrStateCorrupt
}

func (e *CorruptStateError) Error() string { return fmt.Sprintf("%s: %v", e.ID, e.Err) }
func (e *CorruptStateError) Unwrap() error { return e.Err }

// Salvaged is what can still be read from the top level of a corrupt state: enough for an
// operator to tell which execution it was, and for the state that replaces it.
type Salvaged struct {
	ExecutionID string       `json:"execution_id,omitempty"`
	TenantID    string       `json:"tenant_id,omitempty"`
	FlowID      string       `json:"flow_id,omitempty"`
	FlowVersion string       `json:"flow_version,omitempty"`
	Status      state.Status `json:"status,omitempty"`
	CurrentNode string       `json:"current_node,omitempty"`
	StartTime   time.Time    `json:"start_time,omitzero"`
}

// Salvage reads the top-level string fields of a state token by token, skipping every other
// value without decoding it: it works where the whole document cannot be decoded (nested past
// the decoder's depth, a field of the wrong type), and stops quietly where the bytes end or
// stop being JSON.
func Salvage(raw []byte) Salvaged {
	var s Salvaged
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return s
	}
	fields := map[string]*string{"execution_id": &s.ExecutionID, "tenant_id": &s.TenantID, "flow_id": &s.FlowID,
		"flow_version": &s.FlowVersion, "current_node": &s.CurrentNode}
	var status, start string
	fields["status"], fields["start_time"] = &status, &start
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := t.(string)
		v, err := dec.Token()
		if err != nil {
			break
		}
		if str, ok := v.(string); ok {
			if dst, want := fields[name]; want {
				*dst = str
			}
			continue
		}
		if d, ok := v.(json.Delim); ok && (d == '{' || d == '[') && !skipValue(dec) {
			break
		}
	}
	s.Status = state.Status(status)
	if at, err := time.Parse(time.RFC3339Nano, start); err == nil {
		s.StartTime = at
	}
	return s
}

// skipValue reads tokens up to the end of the object or array just opened.
func skipValue(dec *json.Decoder) bool {
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return true
}

// ErrCorruptChanged: the state key no longer holds the corrupt bytes ReplaceCorrupt was given
// (a worker or another operator changed it); nothing was written.
// Permanent (it matches ErrInvalid): the same replacement can never apply again.
var ErrCorruptChanged = ErrInvalid.Kind("", "the stored state changed since it was read")

// ReplaceCorrupt writes st in place of the corrupt bytes raw that Load found (an operator ending
// an execution that can no longer be read). ErrCorruptChanged when the key holds anything else
// by now.
func (ts *TenantStore) ReplaceCorrupt(ctx context.Context, raw []byte, st *state.Execution) error {
	n, err := ts.replaceRead(ctx, raw, st, ReplaceFencing)
	switch {
	case err != nil:
		return err
	case n == ReplacedChanged:
		return fmt.Errorf("%w: %s", ErrCorruptChanged, st.ExecutionID)
	}
	return nil
}
