package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"plaita/internal/keyring"
	"plaita/model"
	"plaita/store"
	"plaita/store/sqlite"
)

// Hooks are the signed trigger contracts (docs/credentials.md, "Signed triggers"): an external
// system starts a flow, or publishes an event, with a request signed as Standard Webhooks
// prescribes (signature.go) under a contract key — one of the tenant's (created and retired
// over the API, several active at once for a rotation, their secrets sealed in the console
// database under the purpose subkey "contract-keys"), or the global one
// (PLAITA_CONSOLE_SECRET_ID / _SECRET_KEY; empty: the global path answers 503). A message id
// is acted on once: a start is keyed by it (StartOnce) and an event published under it, so a
// replay — a sender's retry, or a captured request sent again within the timestamp window —
// starts or publishes nothing more and is answered as the first was.
type Hooks struct {
	db     *sqlite.DB
	plane  *Plane
	key    KeySource
	global GlobalContract
	now    func() time.Time
}

// GlobalContract is the global contract key: Secret empty turns the global path off.
type GlobalContract struct {
	ID     string
	Secret []byte
}

// NewHooks is the signed triggers over the console database db and plane.
func NewHooks(db *sqlite.DB, plane *Plane, key KeySource, global GlobalContract) *Hooks {
	return &Hooks{db: db, plane: plane, key: key, global: global, now: time.Now}
}

const contractPurpose = "contract-keys"

func contractAD(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// ContractKey is a tenant's contract key as shown: never its secret.
type ContractKey struct {
	Tenant    string     `json:"tenant_id"`
	ID        string     `json:"key_id"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by,omitempty"`
	RetiredAt *time.Time `json:"retired_at,omitempty"`
}

func contractKeyOf(k sqlite.ContractKey) ContractKey {
	return ContractKey{Tenant: k.Tenant, ID: k.ID, CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy, RetiredAt: k.RetiredAt}
}

// ContractKeyCreated is a new contract key: its secret is shown this once.
type ContractKeyCreated struct {
	ContractKey
	Secret string `json:"secret" doc:"whsec_…: give it to the sender; it is not shown again"`
}

// CreateContractKey makes a new contract key of tenant.
func (h *Hooks) CreateContractKey(ctx context.Context, tenant, by string) (ContractKeyCreated, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return ContractKeyCreated{}, err
	}
	ring, err := h.key()
	if err != nil {
		return ContractKeyCreated{}, refuse(Unavailable, "credentials_key_unavailable", err, "the credentials key: %v", err)
	}
	secret, id := make([]byte, 32), make([]byte, 8)
	_, _ = rand.Read(secret)
	_, _ = rand.Read(id)
	k := sqlite.ContractKey{Tenant: t, ID: "ck_" + hex.EncodeToString(id), CreatedAt: h.now().UTC().Truncate(time.Millisecond), CreatedBy: by}
	if k.Sealed, err = ring.Current.Seal(contractPurpose, contractAD(t, k.ID), secret); err != nil {
		return ContractKeyCreated{}, err
	}
	if err := h.db.CreateContractKey(ctx, k); err != nil {
		return ContractKeyCreated{}, err
	}
	return ContractKeyCreated{ContractKey: contractKeyOf(k), Secret: FormatWebhookSecret(secret)}, nil
}

// ContractKeys lists tenant's contract keys, newest first, the retired ones too.
func (h *Hooks) ContractKeys(ctx context.Context, tenant string) ([]ContractKey, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	keys, err := h.db.ContractKeys(ctx, t, false)
	if err != nil {
		return nil, err
	}
	out := make([]ContractKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, contractKeyOf(k))
	}
	return out, nil
}

// RetireContractKey ends one of tenant's contract keys: requests signed with it are refused.
func (h *Hooks) RetireContractKey(ctx context.Context, tenant, id string) error {
	t, err := tenantOf(tenant)
	if err != nil {
		return err
	}
	if err := h.db.RetireContractKey(ctx, t, id, h.now()); errors.Is(err, store.ErrNotFound) {
		return refuse(NotFound, "contract_key_not_found", err, "no active contract key %s in tenant %s", id, t)
	} else if err != nil {
		return err
	}
	return nil
}

// Trigger is one signed request: to start FlowID (with the body as INPUT) or to publish an
// event of EventType (with the body as its data), in Tenant; Global: signed with the global key.
type Trigger struct {
	Tenant    string
	Global    bool
	FlowID    string
	EventType string
	Headers   SignedHeaders
	Body      []byte
}

// Triggered is what a signed request did.
type Triggered struct {
	MessageID   string `json:"message_id"`
	ExecutionID string `json:"execution_id,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	// Replayed: the message id was acted on before: nothing more was started or published.
	Replayed bool `json:"replayed"`
	// Key names the contract key that signed it ("global:<id>" for the global key).
	Key string `json:"key"`
}

// Handle verifies a signed request and acts on it. The refusals are named: hook_unsigned,
// hook_malformed, hook_stale, hook_bad_signature (401/400), hook_global_off (503), and those of
// the start or the publication.
func (h *Hooks) Handle(ctx context.Context, tr Trigger) (Triggered, error) {
	p, err := ParseSignedHeaders(tr.Headers)
	if err != nil {
		return Triggered{}, err
	}
	t, err := tenantOf(tr.Tenant)
	if err != nil {
		return Triggered{}, err
	}
	secrets, names, err := h.secrets(ctx, t, tr.Global)
	if err != nil {
		return Triggered{}, err
	}
	if err := VerifySignature(p, tr.Body, secrets, h.now()); err != nil {
		return Triggered{}, err
	}
	out := Triggered{MessageID: p.ID, Key: names[matching(p, tr.Body, secrets)]}
	if !json.Valid(tr.Body) {
		return out, refuse(Invalid, "hook_body_not_json", nil, "the body is not JSON")
	}
	if tr.FlowID != "" {
		s, err := StartOnce(ctx, h.plane, StartRequest{Tenant: t, FlowID: tr.FlowID, Input: tr.Body}, "hook:"+p.ID)
		if err != nil {
			return out, err
		}
		out.ExecutionID, out.Replayed = s.ExecutionID, s.Replayed
		return out, nil
	}
	// A hook's answer says nothing of who waits: the count would be Redis calls per request
	// that no caller reads.
	ev, err := h.plane.PublishEventUncounted(ctx, store.Event{ID: "hook_" + p.ID, Type: tr.EventType, TenantID: t, Data: tr.Body})
	if err != nil {
		return out, err
	}
	out.EventID, out.Replayed = ev.Event.ID, ev.Duplicate
	return out, nil
}

// secrets are the keys a request on the tenant's path (or the global one) may be signed with,
// and their names.
func (h *Hooks) secrets(ctx context.Context, tenant string, global bool) ([][]byte, []string, error) {
	if global {
		if len(h.global.Secret) == 0 {
			return nil, nil, refuse(Unavailable, "hook_global_off", nil,
				"the global contract key is not set (PLAITA_CONSOLE_SECRET_ID / PLAITA_CONSOLE_SECRET_KEY): sign with a tenant contract key on /api/hooks/tenant/…")
		}
		return [][]byte{h.global.Secret}, []string{"global:" + h.global.ID}, nil
	}
	keys, err := h.db.ContractKeys(ctx, tenant, true)
	if err != nil {
		return nil, nil, err
	}
	if len(keys) == 0 {
		return nil, nil, refuse(model.Unauthenticated, "hook_bad_signature", nil, "tenant %s has no active contract key", tenant)
	}
	ring, err := h.key()
	if err != nil {
		return nil, nil, refuse(Unavailable, "credentials_key_unavailable", err, "the credentials key: %v", err)
	}
	var secrets [][]byte
	var names []string
	for _, k := range keys {
		s, err := ring.Open(contractPurpose, contractAD(tenant, k.ID), k.Sealed)
		if err != nil {
			if errors.Is(err, keyring.ErrWrongKey) {
				continue // sealed under a key this console no longer holds: it cannot sign anything here
			}
			return nil, nil, err
		}
		secrets, names = append(secrets, s), append(names, k.ID)
	}
	return secrets, names, nil
}

// matching is the index of the secret that signed p (VerifySignature said one did).
func matching(p ParsedSignature, body []byte, secrets [][]byte) int {
	for i, s := range secrets {
		if VerifySignature(p, body, [][]byte{s}, p.Timestamp) == nil {
			return i
		}
	}
	return 0
}

// ContractKeyRotation is what RotateKey did with the contract keys.
type ContractKeyRotation struct {
	Keys       int      `json:"keys"`
	Rewrapped  int      `json:"rewrapped"`
	Already    int      `json:"already"`
	Unopenable []string `json:"unopenable,omitempty"`
}

// RotateKey moves the contract keys of tenants (the retired ones too) to the ring's current
// master key, as Credentials.RotateKey moves the credentials: the data keys re-wrapped, each
// row written only while it holds what was read; resumable.
func (h *Hooks) RotateKey(ctx context.Context, tenants []string, dryRun bool) (ContractKeyRotation, error) {
	var rep ContractKeyRotation
	ring, err := h.key()
	if err != nil {
		return rep, refuse(Unavailable, "credentials_key_unavailable", err, "the credentials key: %v", err)
	}
	for _, tenant := range tenants {
		t, err := tenantOf(tenant)
		if err != nil {
			return rep, err
		}
		keys, err := h.db.ContractKeys(ctx, t, false)
		if err != nil {
			return rep, err
		}
		for _, k := range keys {
			rep.Keys++
			moved, changed, err := ring.RewrapTo(contractPurpose, contractAD(t, k.ID), k.Sealed)
			switch {
			case errors.Is(err, keyring.ErrWrongKey):
				rep.Unopenable = append(rep.Unopenable, t+"/"+k.ID)
				continue
			case err != nil:
				return rep, err
			case !changed:
				rep.Already++
				continue
			case dryRun:
				rep.Rewrapped++
				continue
			}
			if ok, err := h.db.ReplaceContractKeySealed(ctx, t, k.ID, k.Sealed, moved); err != nil {
				return rep, err
			} else if ok {
				rep.Rewrapped++
			}
		}
	}
	return rep, nil
}
