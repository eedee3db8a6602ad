package control

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"plaita/model"
)

// Signed triggers follow the Standard Webhooks spec (standardwebhooks.com): the sender signs
// "<webhook-id>.<webhook-timestamp>.<body>" with HMAC-SHA256 under a shared secret and sends
//
//	webhook-id:        a unique id of the message (its retries keep it)
//	webhook-timestamp: Unix seconds
//	webhook-signature: "v1,<base64 signature>", several separated by spaces (a key rotation)
//
// A secret is written "whsec_<base64 of its bytes>". Stripe's `Stripe-Signature: t=…,v1=…` is
// not accepted: it carries no message id, so a replay could only be told by its body.

// SignatureTolerance is how far a timestamp may be from the receiver's clock, either way.
const SignatureTolerance = 5 * time.Minute

// MaxSignatures bounds the signatures one header may carry.
const MaxSignatures = 10

// SignedHeaders are a request's signature headers, as received.
type SignedHeaders struct {
	ID, Timestamp, Signature string
}

// ParsedSignature is what ParseSignedHeaders read.
type ParsedSignature struct {
	ID         string
	Timestamp  time.Time
	Signatures [][]byte // the v1 signatures, decoded
}

// ParseSignedHeaders reads the three headers. Every refusal is a *Refusal (hook_unsigned,
// hook_malformed) naming the header.
func ParseSignedHeaders(h SignedHeaders) (ParsedSignature, error) {
	var out ParsedSignature
	switch {
	case h.ID == "" || h.Timestamp == "" || h.Signature == "":
		return out, refuse(model.Unauthenticated, "hook_unsigned", nil, "a signed request carries webhook-id, webhook-timestamp and webhook-signature")
	case len(h.ID) > 256 || strings.ContainsAny(h.ID, " \t\r\n."):
		return out, refuse(Invalid, "hook_malformed", nil, "webhook-id: at most 256 characters, no spaces or dots")
	}
	ts, err := strconv.ParseInt(h.Timestamp, 10, 64)
	if err != nil || ts < 0 || len(h.Timestamp) > 12 {
		return out, refuse(Invalid, "hook_malformed", nil, "webhook-timestamp: Unix seconds")
	}
	out.ID, out.Timestamp = h.ID, time.Unix(ts, 0).UTC()
	for _, part := range strings.Fields(h.Signature) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok {
			return out, refuse(Invalid, "hook_malformed", nil, "webhook-signature: each signature is v1,<base64>")
		}
		if version != "v1" {
			continue // another scheme (v1a: asymmetric): not ours, and not an error
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			return out, refuse(Invalid, "hook_malformed", nil, "webhook-signature: a v1 signature is the base64 of 32 bytes")
		}
		if len(out.Signatures) == MaxSignatures {
			return out, refuse(Invalid, "hook_malformed", nil, "webhook-signature: more than %d signatures", MaxSignatures)
		}
		out.Signatures = append(out.Signatures, b)
	}
	if len(out.Signatures) == 0 {
		return out, refuse(model.Unauthenticated, "hook_unsigned", nil, "webhook-signature holds no v1 signature")
	}
	return out, nil
}

// ParseWebhookSecret reads a secret written "whsec_<base64>" (or the bare base64).
func ParseWebhookSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whsec_"))
	if err != nil || len(b) < 16 || len(b) > 64 {
		return nil, fmt.Errorf("a webhook secret is whsec_ and the base64 of 16 to 64 bytes")
	}
	return b, nil
}

// FormatWebhookSecret writes a secret as senders configure it.
func FormatWebhookSecret(secret []byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(secret)
}

// Sign is the v1 signature of body under secret (what a sender computes; the tests use it).
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, ts.Unix(), body))
}

func mac(secret []byte, id string, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature checks p against the secrets (any one matching is enough) and now: a
// timestamp further than SignatureTolerance either way is hook_stale; no match is
// hook_bad_signature. The comparison is constant-time (hmac.Equal).
func VerifySignature(p ParsedSignature, body []byte, secrets [][]byte, now time.Time) error {
	if d := now.Sub(p.Timestamp); d > SignatureTolerance || d < -SignatureTolerance {
		return refuse(model.Unauthenticated, "hook_stale", nil, "webhook-timestamp is %s from this server's clock: at most %s either way",
			d.Round(time.Second), SignatureTolerance)
	}
	for _, s := range secrets {
		want := mac(s, p.ID, p.Timestamp.Unix(), body)
		for _, got := range p.Signatures {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return refuse(model.Unauthenticated, "hook_bad_signature", nil, "no signature matches a contract key of this endpoint")
}
