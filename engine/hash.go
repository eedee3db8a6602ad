package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// FlowHashAlgo tags how FlowHash is computed. A change of the computation gets a new tag, so
// executions suspended under the old one are recognised as "upgrade", not "changed flow".
const FlowHashAlgo = "sha256-canonical-json-v1"

// FlowHash is sha256 over the canonical JSON of a definition: keys sorted, insignificant
// whitespace removed, numbers as written.
func FlowHash(definition []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(definition))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// HashCheck is the decision of the flow_hash compatibility gate.
type HashCheck struct {
	RefreshTag   bool // same hash under a new algorithm tag: write the new tag
	WriteNewHash bool // allowed change: write the new hash and tag (and log a WARNING)
}

// CheckFlowHash applies the flow_hash compatibility table (docs/flows.md) when an execution
// resumes:
//
//	same algo, same hash        → resume
//	same algo, different hash   → refuse (ErrFlowChanged), even with allow
//	other algo, same hash       → resume and refresh the tag
//	other algo, different hash  → ErrFlowHashMismatch (upgrade suspected) unless allow
//	no stored algo (old state)  → treated as the same algorithm
func CheckFlowHash(storedAlgo, storedHash, algo, hash string, allow bool) (HashCheck, error) {
	sameAlgo := storedAlgo == "" || storedAlgo == algo
	sameHash := storedHash == hash
	switch {
	case sameHash && sameAlgo:
		return HashCheck{}, nil
	case sameHash:
		return HashCheck{RefreshTag: true}, nil
	case sameAlgo:
		return HashCheck{}, &FlowHashError{Err: ErrFlowChanged, StoredAlgo: storedAlgo, StoredHash: storedHash, CurrentAlgo: algo, CurrentHash: hash}
	case allow:
		return HashCheck{WriteNewHash: true}, nil
	}
	return HashCheck{}, &FlowHashError{Err: ErrFlowHashMismatch, StoredAlgo: storedAlgo, StoredHash: storedHash,
		CurrentAlgo: algo, CurrentHash: hash, UpgradeSuspected: true}
}
