package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"plaita/store/sqlite"
)

// Starts that a client retries: the console's Idempotency-Key and `plaita start
// --idempotency-key` name a start, so that a retry — however late, on whichever console or
// host — makes no second execution (docs/console.md, POST /api/executions).

// IdempotentID is the execution id of an idempotency key in a tenant (canonical, "default" for
// the default one): a pure function of the two, so every retry names the same execution, and a
// worker given its start twice continues the one it created.
func IdempotentID(tenant, key string) string {
	sum := sha256.Sum256([]byte("plaita-idempotency\x00" + tenant + "\x00" + key))
	return "ex_" + hex.EncodeToString(sum[:12])
}

// IdempotencyKeyFingerprint is what an audit row records of an idempotency key: its public
// fingerprint, never the key.
func IdempotencyKeyFingerprint(key string) string { return sqlite.Fingerprint(key) }

// StartOnce is p.Start for a start named by key ("" : a plain start). When the execution the
// key names exists already, nothing is enqueued: the answer is that execution, Replayed — or, if
// it is of another flow or version, a Conflict refusal idempotency_key_reused.
func StartOnce(ctx context.Context, p *Plane, req StartRequest, key string) (Started, error) {
	if key == "" {
		return p.Start(ctx, req)
	}
	tenant, err := p.Tenant(req.Tenant)
	if err != nil {
		return Started{}, err
	}
	req.Tenant, req.ExecutionID = tenant, IdempotentID(tenant, key)
	shown, err := p.Show(ctx, tenant, req.ExecutionID)
	if r := AsRefusal(err); r != nil && r.Class == NotFound {
		// Show reads the state, then the stream: a worker that saved the state and settled the
		// task between the two reads leaves neither to see. The state is read once more, so a
		// key's second call never starts what the first one did.
		shown, err = p.Show(ctx, tenant, req.ExecutionID)
	}
	switch r := AsRefusal(err); {
	case err == nil:
	case r != nil && r.Class == NotFound:
		return p.Start(ctx, req)
	default:
		return Started{}, err
	}
	flowID := req.FlowID
	if len(req.Definition) > 0 { // a definition to publish: its id is the flow's
		f, err := p.ParseFlow(req.Definition)
		if err != nil {
			return Started{}, refuse(Invalid, "invalid_flow", err, "%v", err)
		}
		flowID = f.ID
	}
	out := Started{ExecutionID: req.ExecutionID, TenantID: tenant, Queue: p.QueueName(), Replayed: true,
		FlowID: flowID, FlowVersion: req.Version}
	if st := shown.Execution; st != nil {
		if st.FlowID != flowID || (req.Version != "" && st.FlowVersion != req.Version) {
			return Started{}, refuse(Conflict, "idempotency_key_reused", nil,
				"the idempotency key was used for execution %s of flow %s version %s; use a new key for another start",
				st.ExecutionID, st.FlowID, st.FlowVersion)
		}
		out.FlowID, out.FlowVersion = st.FlowID, st.FlowVersion
	}
	return out, nil
}
