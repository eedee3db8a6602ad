package roles

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// An execution whose stored state no longer decodes stays in an operator's reach: show prints
// what is stored, cancel replaces it with a cancelled state, delete removes it. Resuming it is
// refused: no worker could run it.

// corruptRawShown bounds how much of the stored bytes show prints.
const corruptRawShown = 64 << 10

// corruptView is `execution show` of a corrupt state.
type corruptView struct {
	ExecutionID  string         `json:"execution_id"`
	TenantID     string         `json:"tenant_id"`
	Corrupt      bool           `json:"corrupt"`
	Error        string         `json:"error"`
	Salvaged     store.Salvaged `json:"salvaged"`
	RawBytes     int            `json:"raw_bytes"`
	RawSHA256    string         `json:"raw_sha256,omitempty"`
	Raw          string         `json:"raw"`
	RawTruncated bool           `json:"raw_truncated"`
	Commands     []string       `json:"commands"`
}

func newCorruptView(k *conn, ce *store.CorruptStateError) corruptView {
	v := corruptView{ExecutionID: ce.ID, TenantID: k.sp.Tenant(), Corrupt: true, Error: ce.Err.Error(),
		Salvaged: store.Salvage(ce.Raw), RawBytes: len(ce.Raw), Raw: string(ce.Raw)}
	if ce.Raw != nil {
		sum := sha256.Sum256(ce.Raw)
		v.RawSHA256 = hex.EncodeToString(sum[:])
	}
	if len(v.Raw) > corruptRawShown {
		v.Raw, v.RawTruncated = v.Raw[:corruptRawShown], true
	}
	if ce.Raw != nil {
		v.Commands = append(v.Commands, executionCommandLine("cancel", ce.ID, k.sp.Tenant()))
	}
	v.Commands = append(v.Commands, executionCommandLine("delete", ce.ID, k.sp.Tenant()))
	return v
}

func showCorrupt(w io.Writer, asJSON bool, k *conn, ce *store.CorruptStateError) error {
	v := newCorruptView(k, ce)
	if asJSON {
		return writeJSON(w, v)
	}
	fmt.Fprintf(w, "execution %s (tenant %s): its stored state cannot be read\n", v.ExecutionID, v.TenantID)
	fmt.Fprintf(w, "  error:     %s\n", v.Error)
	if s := v.Salvaged; s.FlowID != "" || s.Status != "" {
		fmt.Fprintf(w, "  as stored: flow %s version %s, %s at node %q\n", s.FlowID, s.FlowVersion, s.Status, s.CurrentNode)
	}
	fmt.Fprintf(w, "  stored:    %d bytes, sha256 %s\n", v.RawBytes, v.RawSHA256)
	more := ""
	if v.RawTruncated {
		more = fmt.Sprintf(" (first %d bytes; --json has them too)", corruptRawShown)
	}
	fmt.Fprintf(w, "  raw%s:\n%s\n", more, v.Raw)
	fmt.Fprintln(w, "  end it (the stored bytes are replaced by a cancelled state) or remove it:")
	for _, c := range v.Commands {
		fmt.Fprintf(w, "    %s\n", c)
	}
	return nil
}

// cancelCorrupt ends an execution whose state cannot be read: a cancelled state that keeps what
// could be salvaged replaces the stored bytes (unless they changed meanwhile).
func cancelCorrupt(ctx context.Context, k *conn, ce *store.CorruptStateError, asJSON bool, stdout io.Writer) error {
	if ce.Raw == nil {
		return cliFail("cancel", "%v; the key holds no state to replace: `%s` removes it", ce, executionCommandLine("delete", ce.ID, k.sp.Tenant()))
	}
	now := time.Now().UTC()
	sv := store.Salvage(ce.Raw)
	sum := sha256.Sum256(ce.Raw)
	why := fmt.Sprintf("the stored state could not be read (%v); cancelled by an operator, its %d bytes (sha256 %s) replaced",
		ce.Err, len(ce.Raw), hex.EncodeToString(sum[:]))
	st := &state.Execution{ExecutionID: ce.ID, TenantID: k.sp.Tenant(), FlowID: sv.FlowID, FlowVersion: sv.FlowVersion,
		Engine: engine.Version, Status: state.Cancelled, CurrentNode: sv.CurrentNode, Context: map[string]any{},
		NodeTimings: map[string]*state.NodeTiming{}, StartTime: cmp.Or(sv.StartTime, now), LastUpdate: now, EndTime: &now,
		Error:    &state.ErrorInfo{Type: engine.ErrTypeStateCorrupt, Node: sv.CurrentNode, Message: why, Permanent: true},
		Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Node: sv.CurrentNode, Event: "cancelled", Detail: "stored state unreadable"}}}
	err := k.ts.ReplaceCorrupt(ctx, ce.Raw, st)
	switch {
	case errors.Is(err, store.ErrCorruptChanged):
		return cliFail("cancel", "execution %s: %v; look again with `%s`", ce.ID, err, executionCommandLine("show", ce.ID, k.sp.Tenant()))
	case err != nil:
		return cliFail("cancel", "execution %s: %v", ce.ID, err)
	}
	if asJSON {
		return writeJSON(stdout, map[string]any{"execution_id": ce.ID, "tenant_id": k.sp.Tenant(), "action": "cancel",
			"was": "corrupt", "result": "cancelled", "enqueued": false, "replaced_bytes": len(ce.Raw)})
	}
	fmt.Fprintf(stdout, "execution %s: cancelled (its unreadable state of %d bytes was replaced)\n", ce.ID, len(ce.Raw))
	return nil
}

// executionCommandLine is `plaita execution VERB ID [--tenant T]`, quoted for a shell.
func executionCommandLine(verb, id, tenant string) string {
	parts := []string{"plaita", "execution", verb, shellQuote(id)}
	if tenant != keys.DefaultTenant && tenant != "" {
		parts = append(parts, "--tenant", shellQuote(tenant))
	}
	return strings.Join(parts, " ")
}
